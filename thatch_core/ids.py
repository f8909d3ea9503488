"""The chat session id of an MCP-host conversation (R31).

A leaf module: the hook path (``mcp``) and continuation adoption
(``continuation``) both derive ids from host session ids.
"""
from __future__ import annotations

import hashlib

MCP_PREFIX = "mcp_"


def mcp_session_id(host_session_id: str) -> str:
    """The stable chat session id of an MCP-host conversation (R31)."""
    return MCP_PREFIX + hashlib.sha256(host_session_id.encode("utf-8")).hexdigest()[:12]
