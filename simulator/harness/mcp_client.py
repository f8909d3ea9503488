"""A fake host's end of one MCP stdio session with the thatch server.

Each request goes out as one JSON-RPC line and comes back as one reply line
(simulator/harness/hostio.py states both), through whatever carries the
host's stdio: the pipe to a Claude Code MCP server child, or a direct call
into the Cursor workspace's own handler. A session opens as a host opens it:
`initialize`, then `notifications/initialized`, then `tools/list`; a server
process that was replaced (it crashed) is a new session and is opened again
before the next call, with its ids counting from 1 again.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from simulator.harness.hostio import JsonRpcClient, RpcError, listed_tools, rpc_result, tool_reply

# What a host answers the model for a tool its server did not list.
NO_SUCH_TOOL = "No such tool available: {name}"


class McpClient:
    """One host's MCP session; `send(line)` carries a request line and returns the reply line
    (None for a notification), `session_key()` changes whenever the server process is a new one."""

    def __init__(self, client_name: str, send: Callable[[str], Optional[str]],
                 session_key: Callable[[], Any] = lambda: 0) -> None:
        self.rpc = JsonRpcClient(client_name)
        self._send = send
        self._session_key = session_key
        self._open_for: Any = None
        self._opened = False
        self.tools: list[str] = []
        self.server_info: dict[str, Any] = {}

    def open(self) -> None:
        """The opening exchange: initialize (a refusal is a broken server), initialized, tools/list."""
        self.rpc.reset()
        rid, line = self.rpc.initialize()
        result = rpc_result(self._send(line), rid)
        if "error" in result:
            raise RpcError(f"the MCP server refused initialize: {result['error']}")
        self.server_info = dict(result.get("serverInfo") or {})
        self._send(self.rpc.initialized())
        rid, line = self.rpc.list_tools()
        self.tools = listed_tools(self._send(line), rid)
        self._open_for, self._opened = self._session_key(), True

    def mcp_name(self, tool: str) -> Optional[str]:
        """The listed name the host calls for chat tool `tool` (listed as is, or without `thatch_`)."""
        for name in (tool, tool.removeprefix("thatch_")):
            if name in self.tools:
                return name
        return None

    def call(self, tool: str, args: dict[str, Any]) -> tuple[bool, str]:
        """(ok, text) of one tools/call, opening the session first when the server is a new one."""
        if not self._opened or self._open_for != self._session_key():
            self.open()
        name = self.mcp_name(tool)
        if name is None:
            return False, NO_SUCH_TOOL.format(name=tool)
        rid, line = self.rpc.call_tool(name, args)
        return tool_reply(self._send(line), rid)
