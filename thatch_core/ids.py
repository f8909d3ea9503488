"""The chat session id of an MCP-host conversation (R31).

A leaf module: the hook path (``mcp``) and continuation adoption
(``continuation``) both derive ids from host session ids.

The id hashes the LOWER-CASED host session id, as the real thatch does, so a
database the real thatch wrote and one thatch_core wrote agree on every
conversation's id (D-real-host-1). ``legacy_mcp_session_id`` is the
derivation thatch_core used before, kept only to carry such rows over.
"""
from __future__ import annotations

import hashlib

MCP_PREFIX = "mcp_"


def _hashed(text: str) -> str:
    return MCP_PREFIX + hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def mcp_session_id(host_session_id: str) -> str:
    """The stable chat session id of an MCP-host conversation (R31):
    ``mcp_`` + the first 12 hex digits of sha256 of the lower-cased id."""
    return _hashed(host_session_id.lower())


def legacy_mcp_session_id(host_session_id: str) -> str:
    """The id an earlier thatch_core derived (sha256 of the id as given); the
    same as ``mcp_session_id`` for an id without upper-case letters."""
    return _hashed(host_session_id)
