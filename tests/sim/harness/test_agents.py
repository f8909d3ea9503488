"""Scripted agents and the turn queue, without any harness."""

from __future__ import annotations

import pytest

from simulator.harness.agents import (
    PingPongAgent, ReaderAgent, SilentAgent, TurnState, make_agent, senders_in_read,
)
from simulator.scenario.model import Agent as AgentSpec
from thatch_core.prompts import chat_inbox_frame, inbox_line

READ = chat_inbox_frame([
    inbox_line("ba-sil-00001", "2026-01-05T09:00:31Z", "hello"),
    inbox_line("unknown (ses_abcdef12, departed)", "2026-01-05T09:00:32Z", "bye"),
    inbox_line("ot-ter-00002", "2026-01-05T09:00:33Z", "[from x, Jan 5 09:00Z] tricky body"),
    inbox_line("ba-sil-00001", "2026-01-05T09:00:34Z", "again"),
])


class Reply:
    def __init__(self, ok, text):
        self.ok, self.text = ok, text


class Tools:
    def __init__(self, read_text=READ, ok=True):
        self.calls = []
        self.read_text, self.ok = read_text, ok

    def __call__(self, tool, args):
        self.calls.append((tool, dict(args)))
        return Reply(self.ok, self.read_text if tool.endswith("read") else "sent")


@pytest.mark.rules("R10")
def test_senders_in_read_skips_departed_and_dedups():
    """R10: a departed sender renders as unknown (<id[:12]>, departed) and
    cannot be answered; names are deduplicated in first-seen order."""
    assert senders_in_read(READ) == ["ba-sil-00001", "ot-ter-00002"]
    assert senders_in_read("Inbox empty.") == []


def test_reader_reads_on_mail_turns_only():
    tools = Tools()
    agent = ReaderAgent(AgentSpec(kind="reader"))
    agent.on_turn("user", tools)
    assert tools.calls == []
    for cause in ("wake", "reminder", "followup"):
        agent.on_turn(cause, tools)
    assert [c[0] for c in tools.calls] == ["thatch_chat_read"] * 3


def test_silent_never_reads():
    tools = Tools()
    SilentAgent(AgentSpec(kind="silent")).on_turn("wake", tools)
    assert tools.calls == []


@pytest.mark.rules("R22")
def test_ping_pong_replies_to_each_sender_up_to_its_limit():
    """R22 (P10): one reply per distinct sender, bounded by reply_limit over
    the agent's life."""
    bodies = iter(["r1", "r2", "r3"])
    agent = make_agent(AgentSpec(kind="ping-pong", reply_limit=3), body=lambda: next(bodies))
    tools = Tools()
    agent.on_turn("wake", tools)
    assert tools.calls[1:] == [("thatch_chat_send", {"to": "ba-sil-00001", "body": "r1"}),
                               ("thatch_chat_send", {"to": "ot-ter-00002", "body": "r2"})]
    agent.on_turn("wake", tools)
    sends = [c for c in tools.calls if c[0] == "thatch_chat_send"]
    assert len(sends) == 3 and isinstance(agent, PingPongAgent)


def test_ping_pong_does_not_reply_after_a_failed_read():
    tools = Tools(ok=False)
    make_agent(AgentSpec(kind="ping-pong")).on_turn("wake", tools)
    assert [c[0] for c in tools.calls] == ["thatch_chat_read"]


def test_make_agent_defaults_and_refuses_unknown_kinds():
    assert isinstance(make_agent(None), ReaderAgent)
    assert make_agent(AgentSpec(kind="reader", turn="5s")).turn_ms == 5_000

    class Odd:
        kind = "chatty"

    with pytest.raises(ValueError, match=r"^unknown agent kind 'chatty'"):
        make_agent(Odd())


@pytest.mark.rules("R19")
def test_turns_triggered_while_busy_are_queued_until_idle():
    """R19: a session is in one turn at a time; busy windows and compaction
    hold new turns back until it is idle."""
    s = TurnState()
    assert s.request("user") and s.status == "idle"
    s.begin("user")
    assert s.status == "busy" and not s.request("wake")
    s.end()
    assert s.turns == 1 and s.next_queued() == "wake"
    s.busy_window = True
    assert not s.request("user") and s.next_queued() is None
    s.busy_window = False
    s.compacting = True
    assert s.next_queued() is None
    s.compacting = False
    assert s.next_queued() == "user" and s.next_queued() is None


def _paged_tools(body: str, clip: int):
    """A later-design inbox of one message #7 holding `body`, behind a host that clips each output at `clip`."""
    from thatch_core import later
    from thatch_core.prompts import chat_page_frame
    calls = []

    def tools(tool, args):
        calls.append(dict(args))
        if "message" not in args:
            text = chat_inbox_frame([inbox_line("ba-sil-00001", "2026-01-05T09:00:31Z", later.clipped(body, 7), 7)])
        else:
            _, page = later.page_text(body, 7, args["offset"])
            text = chat_page_frame([later.page_line(7, "ba-sil-00001", "Jan 5 09:00Z"), page], later.PAGE_DONE)
        return Reply(True, text[:clip])

    return tools, calls


@pytest.mark.rules("R10")
def test_the_reader_pages_until_the_whole_body_has_reached_it():
    """R10 under the later design: a line the host cut, or one the read clipped, is paged from what reached
    the reader; each page starts where the visible part of the last one ended, until the end is seen."""
    body = "".join(f"{n:05d} " for n in range(900))  # 5,400 characters, every offset distinct
    tools, calls = _paged_tools(body, clip=2000)
    ReaderAgent(AgentSpec(kind="reader")).on_turn("wake", tools)
    offsets = [c["offset"] for c in calls if "message" in c]
    assert calls[0] == {} and len(offsets) >= 3 and offsets == sorted(set(offsets))
    covered = offsets[0]  # the drain showed the body up to the first offset
    for offset in offsets:
        assert offset <= covered, "a page skipped characters nobody showed"
        page = tools("thatch_chat_read", {"message": 7, "offset": offset}).text
        shown = page.partition("===[ begin chat inbox ]===\n")[2].partition("\n")[2].partition("\n")[2]
        covered = max(covered, offset + len(shown.partition("\n===[ end chat inbox ]===")[0]))
    assert covered >= len(body)


def test_the_reader_pages_nothing_when_every_line_arrived_whole():
    tools = Tools(chat_inbox_frame([inbox_line("ba-sil-00001", "2026-01-05T09:00:31Z", "short", 3)]))
    ReaderAgent(AgentSpec(kind="reader")).on_turn("wake", tools)
    assert tools.calls == [("thatch_chat_read", {})]
