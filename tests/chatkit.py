"""A real chat store with two opencode sessions registered, and ways to call its tools: the probes that make
thatch_core show its texts (tests/sim/test_shown_texts.py) and its replies (tests/sim/test_replies.py)."""

from __future__ import annotations

import random

from thatch_core.config import ChatConfig, StaticConfig
from thatch_core.mcp import McpChatServer
from thatch_core.policy import LATER
from thatch_core.store import ChatStore
from thatch_core.tools import ChatTools

ON = StaticConfig(ChatConfig())
OFF = StaticConfig(ChatConfig(enabled=False))


class World:
    """A real store with an opencode pair (ses_a, ses_b) registered, and ways to call in."""

    def __init__(self, store: ChatStore):
        self.store = store
        self.tools = ChatTools(store, ON, project="p")
        self.later = ChatTools(store, StaticConfig(ChatConfig(policy=LATER)), project="p")
        self.call("register", "ses_a")
        self.call("register", "ses_b")

    def call(self, tool: str, who: str | None, tools: ChatTools | None = None, **args):
        return (tools or self.tools).call(f"thatch_chat_{tool}", args, identity=who)

    def name(self, session_id: str) -> str:
        return self.store.get(session_id).name

    def mcp(self) -> McpChatServer:
        return McpChatServer(self.store, ON, env={}, rng=random.Random(1))
