"""Messaging policies in thatch_core: the options' pure logic, their tables, and the wiring.

thatch_core.policy states the options (the peer product's design, seed 003,
as composable alternatives to thatch's) and thatch_core.policy_store applies
them inside ChatStore's own transactions. DEFAULT is thatch's design: with it
nothing is published, counted or held.
"""

from __future__ import annotations

import json

import pytest

from thatch_core.config import ConfigSource
from thatch_core.db import open_db
from thatch_core.policy import (
    DEFAULT, NOTHING_HELD, Policy, disposition, is_user_message, policy_from_config, policy_to_config, standing_of,
)
from thatch_core.runtime import OpencodeRuntime
from thatch_core.store import ERR_NOT_REGISTERED, ChatStore
from thatch_core.tools import ChatTools

from opencodekit import FakeClient

QODER = Policy(sender_cap=3, inbound="auto", unregistered="hold", exited="refuse", wake_cap=None)
BYPASS = Policy(inbound="auto", permissions="bypass")


@pytest.fixture
def store(db_path, frozen):
    conn = open_db(db_path)
    yield ChatStore(conn)
    conn.close()


def names(store, *ids):
    return [store.register(sid, project="p").name for sid in ids]


def tables(store, name):
    return store.conn.execute(f"SELECT * FROM {name}").fetchall()


# -- the options --------------------------------------------------------------

def test_the_default_is_thatch_and_writes_no_config():
    assert DEFAULT.is_default and policy_to_config(DEFAULT) == {}
    assert policy_to_config(QODER) == {"senderCap": 3, "inbound": "auto", "unregistered": "hold",
                                       "exited": "refuse", "wakeCap": None}
    assert policy_from_config(policy_to_config(QODER), print) == QODER


def test_a_bad_config_value_keeps_thatchs_option_loudly():
    said = []
    got = policy_from_config({"senderCap": 0, "inbound": "maybe", "colour": "red", "exited": "refuse"}, said.append)
    assert got == Policy(exited="refuse")
    assert len(said) == 3 and any("colour" in s for s in said)


@pytest.mark.parametrize("policy, action, prompts", [
    (Policy(), "accept", False),                                       # thatch
    (Policy(inbound="auto"), "accept", True),                           # asks for confirmation: accepts
    (BYPASS, "hold", True),                                             # bypasses checks: holds, asks
    (Policy(inbound="hold"), "hold", False),                            # the user's own hold: parked
    (Policy(inbound="auto", repository_inbound="hold"), "hold", True),  # a repository tightens, and asks
    (Policy(inbound="refuse", repository_inbound="hold"), "refuse", False),   # never loosens
    (Policy(inbound="auto", permissions="bypass", interactive=False), "refuse", True),   # nobody to ask
    (Policy(inbound="hold", interactive=False), "hold", False),          # configured: honoured even there
])
def test_standing_follows_seed_003(policy, action, prompts):
    st = standing_of(policy)
    assert (st.action, st.prompts) == (action, prompts)


def test_unregistered_senders_are_held_whatever_the_permission_mode():
    assert disposition(None, sender_registered=False).action == "refuse"        # thatch, R8
    assert disposition(standing_of(QODER), sender_registered=False).action == "hold"
    quiet = standing_of(Policy(unregistered="hold", interactive=False, inbound="accept"))
    assert disposition(quiet, sender_registered=False).reason == "nobody-to-review"


def test_only_unmarked_text_is_the_user_writing():
    assert is_user_message([{"type": "text", "text": "go"}])
    assert not is_user_message([{"type": "text", "text": "You have mail", "synthetic": True}])
    assert not is_user_message([])


# -- the store ----------------------------------------------------------------

@pytest.mark.rules("R9")
def test_thatchs_send_touches_no_policy_table(store):
    """R9: under the default policy a send is stored as it always was."""
    _, bob = names(store, "ses_a", "ses_b")
    assert store.send("ses_a", bob, "hi").ok
    assert [tables(store, t) for t in ("chat_inbound", "chat_held", "chat_send_counts")] == [[], [], []]


def test_the_sender_cap_refuses_the_fourth_until_the_user_writes(store):
    _, bob = names(store, "ses_a", "ses_b")
    replies = [store.send("ses_a", bob, f"m{i}", policy=QODER) for i in range(4)]
    assert [r.ok for r in replies] == [True, True, True, False]
    assert replies[3].error.startswith(f"Not sent: you have sent {bob} 3 messages since your user last wrote")
    store.note_user_prompt("ses_a")
    assert store.send("ses_a", bob, "again", policy=QODER).ok


def test_a_prompting_hold_expires_and_tells_the_sender(store, frozen):
    alice, bob = names(store, "ses_a", "ses_b")
    store.publish_inbound("ses_b", BYPASS)
    first = store.send("ses_a", bob, "run the suite")
    second = store.send("ses_a", bob, "and the linter")
    assert "within 5m it expires" in first.reply and "waits until its user reviews it" in second.reply
    assert store.read("ses_b") == []                      # nothing reaches the recipient
    frozen.tick(299)
    assert store.expire_held(["ses_b"]) == 0
    frozen.tick(1)
    assert store.expire_held(["ses_b"]) == 1              # only the prompt had a deadline
    notice = store.read("ses_a")
    assert [n.from_name for n in notice] == [bob]
    assert "expired: nobody reviewed it within 5m, so it was dropped (not refused)" in notice[0].body
    approved = store.review_held("ses_b", "approved")
    assert approved.ok and approved.text.startswith(f"Approved held message #{second.held_id} from {alice}")
    assert [m.body for m in store.read("ses_b")] == ["and the linter"]
    assert store.review_held("ses_b", "declined").text == NOTHING_HELD


def test_never_keeps_the_approval_prompts_default_deadline(store, frozen):
    """Seed 003: dialogExpiry `never` lifts other dialogs' deadlines, not the approval prompt's (5m), so a held
    message still expires, its sender is told, and the next message asks again."""
    _, bob = names(store, "ses_a", "ses_b")
    never = Policy(inbound="auto", permissions="bypass", dialog_expiry_ms=None)
    assert standing_of(never).expiry_ms == 300_000
    store.publish_inbound("ses_b", never)
    first = store.send("ses_a", bob, "run the suite")
    assert "if nobody answers within 5m it expires" in first.reply
    frozen.tick(300)
    assert store.expire_held(["ses_b"]) == 1
    assert "expired: nobody reviewed it within 5m" in store.read("ses_a")[0].body
    assert "if nobody answers within 5m it expires" in store.send("ses_a", bob, "and the linter").reply


def test_a_decline_drops_and_reports_refused(store):
    _, bob = names(store, "ses_a", "ses_b")
    store.publish_inbound("ses_b", Policy(inbound="hold"))
    store.send("ses_a", bob, "hello")
    assert store.review_held("ses_b", "declined").ok
    assert "was refused by its user and dropped" in store.read("ses_a")[0].body
    assert store.read("ses_b") == []


def test_refuse_and_exited_store_nothing(store, frozen):
    _, bob, _ = names(store, "ses_a", "ses_b", "ses_c")
    store.publish_inbound("ses_b", Policy(inbound="refuse"))
    assert store.send("ses_a", bob, "x").error == f"Not delivered: {bob} refuses messages from other sessions."
    store.unregister("ses_c")
    left = store.send("ses_a", "ses_c", "x", policy=QODER)
    assert left.error == 'Not sent: session "ses_c" has exited (it left the chat); nothing was delivered.'
    assert store.send("ses_a", "ses_c", "x").error.startswith("No registered session named")   # thatch
    assert tables(store, "chat_messages") == []


@pytest.mark.rules("R8")
def test_an_unregistered_sender_is_held_only_where_the_recipient_says_so(store):
    """R8: thatch refuses an unregistered sender; a recipient that holds them parks its message."""
    _, bob = names(store, "ses_a", "ses_b")
    assert store.send("ses_x", bob, "hi").error == ERR_NOT_REGISTERED
    store.publish_inbound("ses_b", QODER)
    held = store.send("ses_x", bob, "hi")
    assert held.ok and "you are not registered" in held.reply
    msg = store.review_held("ses_b", "approved").message_id
    assert store.unregistered_message_ids([msg]) == {msg}


def test_a_broadcast_holds_and_refuses_per_recipient(store):
    _, bob, carol, dave = names(store, "ses_a", "ses_b", "ses_c", "ses_d")
    store.publish_inbound("ses_b", Policy(inbound="hold"))
    store.publish_inbound("ses_c", Policy(inbound="refuse"))
    res = store.broadcast("ses_a", "standup")
    assert (res.recipients, res.held, res.refused) == ((dave,), (bob,), (carol,))


# -- the wiring ----------------------------------------------------------------


def config(tmp_path, name, policy):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"chat": {"policy": policy}}))
    return ConfigSource(path)


def test_the_runtime_publishes_counts_and_expires(store, tmp_path, frozen):
    cfg = config(tmp_path, "q", {"inbound": "auto", "permissions": "bypass", "senderCap": 3, "wakeCap": None})
    rt = OpencodeRuntime(store, FakeClient(), directory=str(tmp_path), project="p", config_source=cfg, pid=1,
                         cmdline_reader=lambda pid: ["opencode"], log=lambda m: None)
    rt.start()
    assert rt.poller.max_nudges_per_hour > 10**6                 # no receiver-side wake cap
    rt.on_chat_message("ses_b", [{"type": "text", "text": "start"}])
    rt.on_session_status("ses_b", "busy")                        # hosted from its status event: published
    assert store.conn.execute("SELECT action, prompts FROM chat_inbound").fetchall() == [("hold", 1)]
    alice = store.register("ses_a").name
    bob = store.get("ses_b").name
    assert "held for its user's approval" in store.send("ses_a", bob, "hi").reply
    frozen.tick(301)
    rt.poller.poll()                                             # the prompt ran out
    assert "expired" in store.read("ses_a")[0].body
    store.send("ses_b", alice, "1", policy=rt.policy)
    assert store.conn.execute("SELECT sent FROM chat_send_counts").fetchall() == [(1,)]
    rt.on_chat_message("ses_b", [{"type": "text", "text": "carry on"}])
    assert store.conn.execute("SELECT sent FROM chat_send_counts").fetchall() == []
    rt.dispose()


def test_the_tools_read_the_policy_per_call(store, tmp_path):
    alice, bob = names(store, "ses_a", "ses_b")
    tools = ChatTools(store, config(tmp_path, "cap", {"senderCap": 1}))
    assert tools.call("send", {"to": bob, "body": "one"}, identity="ses_a").ok
    refused = tools.call("send", {"to": bob, "body": "two"}, identity="ses_a")
    assert not refused.ok and refused.echo is None and "1 message since your user last wrote" in refused.text
