"""``thatch-core`` (also ``python -m thatch_core``): the commands a real host runs.

    thatch-core mcp [--db PATH] [--host claude-code|cursor]   the MCP server over stdio
    thatch-core hook EVENT [--json] [--db PATH]                one hook run, payload on stdin
    thatch-core chat list|tail ...                             the terminal views (thatch_core.cli)

The database is ``--db PATH``, else ``$THATCH_DB``, else the CLI's default
(``$THATCH_DB_PATH``, else ``$XDG_CONFIG_HOME/thatch/thatch.db``). The chat
switches are read from ``config.json`` beside the database (``--config PATH``
overrides), re-read on every call.

``mcp`` serves ``thatch_core.doors.TOOL_DEFS`` on the official MCP SDK's
stdio transport; each call goes to ``doors.call_tool`` (the same path as
``doors.JsonRpcHandler``). ``hook`` reads the host's payload from stdin,
prints what ``doors.run_hook`` renders and always exits 0.
"""
from __future__ import annotations

import os
import random
import sys
import threading
from pathlib import Path

from thatch_core import cli, doors
from thatch_core.config import ConfigSource
from thatch_core.db import StoreError, open_db
from thatch_core.git import detect_project
from thatch_core.mcp import McpChatServer, mcp_project_dir
from thatch_core.store import ChatStore

USAGE = """usage:
  thatch-core mcp [--db PATH] [--config PATH] [--host claude-code|cursor]
  thatch-core hook EVENT [--json] [--db PATH] [--config PATH]
      EVENT: """ + " | ".join(doors.HOOK_EVENTS) + """
  thatch-core chat list|tail ...   (thatch-core chat for its options)"""

# A host writes the payload at spawn and closes stdin; one that never closes
# it must not pin the hook forever (the real hook gives up too).
STDIN_GRACE_S = 10.0


class UsageError(Exception):
    """A bad command line: the message and the usage go to stderr, exit 2."""


def _options(argv: list[str], *, values: set[str], switches: set[str] = frozenset()) -> tuple[dict, list[str]]:
    got: dict = {}
    rest: list[str] = []
    i = 0
    while i < len(argv):
        name, eq, inline = argv[i].partition("=")
        if name in switches and not eq:
            got[name] = True
        elif name in values:
            if not eq and i + 1 >= len(argv):
                raise UsageError(f"{name} expects a value")
            value = inline if eq else argv[i + 1]
            i += 0 if eq else 1
            got.setdefault(name, value)
        elif argv[i].startswith("--"):
            raise UsageError(f'unknown option "{argv[i]}"')
        else:
            rest.append(argv[i])
        i += 1
    return got, rest


def db_path(opts: dict, env=None) -> str:
    """``--db``, else ``$THATCH_DB``, else the CLI's default resolution."""
    env = os.environ if env is None else env
    return opts.get("--db") or env.get("THATCH_DB") or cli.default_db_path(env)


def config_source(opts: dict, path: str) -> ConfigSource:
    return ConfigSource(opts.get("--config") or Path(path).expanduser().parent / "config.json")


def project_dir(env=None) -> str:
    """Where the host runs this session: its project dir variables, else the working directory."""
    env = os.environ if env is None else env
    return env.get("CURSOR_PROJECT_DIR") or env.get("CLAUDE_PROJECT_DIR") or os.getcwd()


# ---------------------------------------------------------------------------
# hook
# ---------------------------------------------------------------------------

def read_payload(stream, limit: int = doors.MAX_PAYLOAD_BYTES + 1, grace_s: float = STDIN_GRACE_S) -> bytes:
    """Up to ``limit`` bytes of stdin (one past the cap is enough to refuse);
    nothing from a terminal, and nothing when no end of input comes in time."""
    if stream.isatty():
        return b""
    box: list[bytes] = []
    reader = threading.Thread(target=lambda: box.append(stream.buffer.read(limit)), daemon=True)
    reader.start()
    reader.join(grace_s)
    return box[0] if box else b""


def hook_main(argv: list[str], *, stdin=None, stdout=None, stderr=None) -> int:
    stdin, stdout, stderr = stdin or sys.stdin, stdout or sys.stdout, stderr or sys.stderr
    try:
        opts, rest = _options(argv, values={"--db", "--config"}, switches={"--json"})
        if len(rest) != 1:
            raise UsageError("hook expects one EVENT")
    except UsageError as exc:
        # Still exit 0: a hook's command line is the host's config, and a
        # typo there must not fail every turn.
        print(f"[thatch hook] {exc}", file=stderr)
        return 0
    event, path = rest[0], db_path(opts)
    conns = []

    def open_store():
        conns.append(open_db(path))
        return ChatStore(conns[-1], rng=random.Random())

    payload = read_payload(stdin)
    project = detect_project(project_dir()) if event in ("SessionStart", "UserPromptSubmit") else None
    try:
        result = doors.run_hook(event, payload, store=open_store, config=config_source(opts, path),
                                ppid=os.getppid(), env=os.environ, project=project,
                                json_output=bool(opts.get("--json")))
    finally:
        for conn in conns:
            conn.close()
    if result.stdout:
        stdout.write(result.stdout + "\n")
        stdout.flush()
    if result.stderr:
        stderr.write(result.stderr + "\n")
    return result.exit_code


# ---------------------------------------------------------------------------
# mcp
# ---------------------------------------------------------------------------

class LazyChat:
    """The MCP server's chat surface, opened at the first tool call and opened
    again after a failure: a database that cannot be opened answers every
    call with a refusal, never ends the server."""

    def __init__(self, path: str, config, *, host: str, ppid: int, env, project: str, directory: str):
        self.path, self.config = path, config
        self._kw = {"host": host, "ppid": ppid, "env": env, "project": project, "directory": directory}
        self.server: McpChatServer | None = None

    def call(self, name, arguments) -> tuple[str, bool]:
        if self.server is None:
            try:
                conn = open_db(self.path)
            except StoreError as exc:
                return f"Chat is unavailable: cannot open the chat database {self.path} ({exc}).", True
            self.server = McpChatServer(ChatStore(conn, rng=random.Random()), self.config, **self._kw)
        return doors.call_tool(self.server, name, arguments)


def build_sdk_server(chat: LazyChat):
    """The official SDK's low-level server with the chat tools."""
    import mcp.types as types
    from mcp.server.lowlevel import Server

    tools = [types.Tool.model_validate(t) for t in doors.TOOL_DEFS]

    async def list_tools(ctx, params):
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx, params):
        text, is_error = chat.call(params.name, params.arguments)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)

    return Server(doors.SERVER_NAME, version=doors.SERVER_VERSION, on_list_tools=list_tools,
                  on_call_tool=call_tool)


def mcp_main(argv: list[str]) -> int:
    try:
        opts, rest = _options(argv, values={"--db", "--config", "--host"})
        if rest or opts.get("--host", "claude-code") not in ("claude-code", "cursor"):
            raise UsageError("mcp takes --db, --config and --host claude-code|cursor")
    except UsageError as exc:
        print(f"thatch-core mcp: {exc}\n{USAGE}", file=sys.stderr)
        return 2
    import anyio
    from mcp.server.stdio import stdio_server

    path = db_path(opts)
    config = config_source(opts, path)
    directory = mcp_project_dir(os.environ, thatch_first=config.load().policy.mcp_project_env)
    chat = LazyChat(path, config, host=opts.get("--host", "claude-code"), ppid=os.getppid(),
                    env=os.environ, project=detect_project(directory), directory=directory)
    server = build_sdk_server(chat)

    async def serve():
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    try:
        anyio.run(serve)
    except KeyboardInterrupt:
        pass
    return 0


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command, rest = (argv[0], argv[1:]) if argv else (None, [])
    if command == "mcp":
        return mcp_main(rest)
    if command == "hook":
        return hook_main(rest)
    if command == "chat":
        return cli.main(rest)
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
