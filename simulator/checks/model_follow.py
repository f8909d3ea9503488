"""Feeding the reference model (P11) from a run's history, event by event.

Tool results go to the judges of `simulator.checks.model_replies`; the
other events that change the directory move the model: registrations the
harness observed (`registered`), hook lines (an identity, or the leave line),
leaves (an unregister, a delete or exit step), forks and adoptions (the
model forgets the label), samples (a database read: the model learns the
rows), a sleep long enough for the prune (R26), and a process that died
with a call in flight (its effect may or may not have committed, R23/P5).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar, Optional

from simulator.checks import model_replies as replies
from simulator.checks.model import ECHOING_TOOLS, Model, Msg, modeled, opening
from simulator.checks.view import Call, RunView
from simulator.design import (
    AUTO_ROW_TTL_MS, ECHO_PREFIX, HOUR_MS, MAIL_SWEEP_AGE_MS, MCP_ID_PREFIX, TOMBSTONE_TTL_MS, mcp_session_id,
)
from simulator.replies import IDENTITY, LEFT, decode_hook_line
from simulator.events import (
    ABSENT, FORK, REGISTERED, SAMPLE, Echo, Event, Fork, Hook, Leave, Poll, ProcessExit, ProcessStart,
    Registered, Sample, SleepEnd, Status, ToolCall, ToolResult, UserPrompt,
)
from simulator.scenario.kinds import HOSTS
from simulator.scenario.policies import options_by_process

# Nothing the run made is older than the run, so the prune (R26) can take a row, a tombstone or
# unread mail only once the virtual time passed the shortest of its 7-day TTLs (in a scripted run,
# only after a machine sleep); from then on any poll may have pruned.
PRUNE_REACH_MS = min(AUTO_ROW_TTL_MS, TOMBSTONE_TTL_MS, MAIL_SWEEP_AGE_MS)
MUTATING = ("send", "broadcast", "read", "register", "unregister")
# R31, R32: the Claude Code hooks that ensure-register the conversation and record the host pid
# anchoring its MCP server's identity: at session start and at every prompt (never the Stop hook).
ANCHORING_HOOKS = ("SessionStart", "UserPromptSubmit")
JUDGES = {"send": replies.judge_send, "broadcast": replies.judge_broadcast, "read": replies.judge_read,
          "status": replies.judge_status, "register": replies.judge_register,
          "unregister": replies.judge_unregister}


@dataclass(frozen=True, slots=True, kw_only=True)
class QuietLeave(Event):
    """Not a history kind: the model's stand-in for a delete / exit step of a session the view does
    not count as registered then (`quiet_leaves`); its leave tombstone may or may not be written."""

    KIND: ClassVar[str] = "quiet-leave"
    step: Optional[int] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaveBlur(Event):
    """Not a history kind: a leave sharing its instant with a step scripted before it
    (`placed_leaves`): until that instant is over the session may or may not have left."""

    KIND: ClassVar[str] = "leave-blur"
    step: Optional[int] = None


def follow(view: RunView) -> Model:
    """Run the model over the whole history; its surprises are what it did not predict."""
    m = Model(view, config_changes=config_changes(view))
    options = options_by_process(view.spec)
    m.loose = any(not modeled(o) for o in options.values())
    unmodeled = {p for p, o in options.items() if not modeled(o)}
    seed(m)
    by_call = {c.call.i: c for c in view.mail.calls if c.call is not None}
    by_result = {c.result.i: c for c in view.mail.calls if c.result is not None}
    open_calls: dict[Any, Call] = {}
    if getattr(view.spec, "dispatch", "serial") == "concurrent":
        for c in view.mail.calls:
            if c.tool in JUDGES:
                m.together.setdefault(opening(c).dispatch, []).append(c)
        for e in list(view.history) + view.mail.leaves():
            if isinstance(e, (Registered, Hook, Leave)):
                m.wave_moves.setdefault(e.dispatch, set()).add(e.proc)
    events = sorted(list(view.history) + placed_leaves(view) + quiet_leaves(view), key=lambda e: e.i)
    for e in events:
        if isinstance(e, ToolCall) and e.i in by_call:
            c = by_call[e.i]
            m.started[id(c)] = m.changes
            open_calls[(e.proc, e.session)] = c
            if c.tool in ("send", "broadcast"):
                m.pending[id(c)] = c
        elif isinstance(e, ToolResult) and e.i in by_result:
            c = by_result[e.i]
            open_calls.pop((e.proc, e.session), None)
            m.pending.pop(id(c), None)
            on_result(m, c, e.proc not in unmodeled)
        elif isinstance(e, Echo):
            on_echo(m, open_calls.get((e.proc, e.session)), e)
        elif isinstance(e, (SleepEnd, Poll)) and e.t > PRUNE_REACH_MS:
            prune_blur(m)  # the hourly prune runs in the pollers, at an instant the history does not show
        elif isinstance(e, ProcessExit) and e.reason != "end":
            for key in [k for k in open_calls if k[0] == e.target]:
                cut(m, open_calls.pop(key))
        else:
            on_directory(m, e, open_calls)
    for c in open_calls.values():
        cut(m, c)
    return m


def placed_leaves(view: RunView) -> list[Event]:
    """The view's leaves, where the model can place them. A delete / exit step records no event,
    and the view stands its leave before every event of its time; when another step landed at that
    instant before it in script order (a broadcast to the session, say), the leave may have come
    after that step's calls: the session is unknown through the instant and surely gone after it."""
    out: list[Event] = []
    for e in view.mail.leaves():
        if not isinstance(e, Leave):
            continue
        shared = e.proc is None and e.step is not None and any(
            j < e.step and view.disturbances.landed(j, st.at) == e.t for j, st in enumerate(view.steps))
        if not shared:
            out.append(e)
            continue
        after = next((x.i for x in view.history if x.t > e.t), len(view.history)) - 0.25
        out += [LeaveBlur(i=e.i, t=e.t, dispatch=e.dispatch, proc=e.proc, session=e.session, step=e.step),
                replace(e, i=after)]
    return out


def quiet_leaves(view: RunView) -> list[Event]:
    """Stand-ins for delete / exit steps of sessions the view does not count as registered then: the
    leave writes a tombstone all the same, or not (the session may have had no usable id yet)."""
    counted = {(e.session, e.step) for e in view.mail.leaves() if isinstance(e, Leave)}
    out: list[Event] = []
    for idx, step in enumerate(view.steps):
        who = getattr(step.args, "session", None)
        if step.action in ("delete", "exit") and idx not in view.disturbances.dropped and (who, idx) not in counted:
            pos = next((e.i for e in view.history if e.t >= step.at), len(view.history)) - 0.5
            out.append(QuietLeave(i=pos, t=step.at, dispatch=None, proc=None, session=who, step=idx))
    return out


def seed(m: Model) -> None:
    """The directory at the start: every session id unregistered, no tombstone, an empty inbox;
    a 002-era row registered under its claimed name with its waiting mail (its topic kept, R3)."""
    for sid in m.view.names.label_of:
        m.reg[sid], m.tomb[sid] = False, False
        m.box(sid)
    for row in getattr(m.view.spec, "legacy", []) or []:
        sids = m.view.names.ids.get(row.session or "", ())
        if row.session and sids:
            m.know(sids[0], True, row.name, row.session)
            m.box(sids[0]).msgs += [Msg(body.strip(), True) for body in row.mail]
            # Its mail was sent when the row was last seen: once older than the sweep age, the hourly
            # prune may take it whenever its recipient is out of the directory (R26; the row stays).
            if row.mail and row.last_seen_ago + m.view.t_end + HOUR_MS >= MAIL_SWEEP_AGE_MS:
                m.sweepable.add(sids[0])
        m.owner.setdefault(row.name.lower(), row.session or f"legacy row {row.name}")


def config_changes(view: RunView) -> dict[Optional[str], list[tuple[int, bool]]]:
    """process label -> (the instant it landed, the `chat.enabled` it set) of each config step that
    set one, in step order: read from the steps once, asked at every judged call (`enabled_at`)."""
    out: dict[Optional[str], list[tuple[int, bool]]] = {}
    for idx, step in enumerate(view.steps):
        if step.action != "config" or idx in view.disturbances.dropped:
            continue
        new = getattr(step.args, "enabled", None)
        if new is not None:
            out.setdefault(step.args.process, []).append((view.disturbances.landed(idx, step.at), new))
    return out


def enabled_at(view: RunView, proc: Optional[str], t: int,
               changes: dict[Optional[str], list[tuple[int, bool]]]) -> set[bool]:
    """The `chat.enabled` values a tool call of `proc` at t may read (R29: re-read per call); a
    config step at the call's own time may land on either side of it (`changes`: `config_changes`)."""
    spec = next((p for p in getattr(view.spec, "processes", []) if p.id == proc), None)
    values = {spec.config.enabled if spec is not None else True}
    for at, new in changes.get(proc, ()):
        if at <= t:
            values = {new} if at < t else values | {new}
    return values


def on_result(m: Model, c: Call, judged: bool) -> None:
    racy = m.changes != m.started.get(id(c), m.changes) or any(
        x.tool in MUTATING for x in m.overlapping(c)) or m.moved_in_wave(c)
    judge = JUDGES.get(c.tool)
    if judge is None or c.result is None:
        return
    if not judged:
        for sid in m.identities(c)[0]:
            if sid:
                m.know(sid, None)
                m.box(sid).blur()
        m.ghosts.add(c.body)
        return
    before = m.changes
    judge(m, c, enabled_at(m.view, c.proc, c.t, m.config_changes), racy)
    m.changes = before + 1 if c.tool in MUTATING else m.changes
    check_echo(m, c)


def on_echo(m: Model, c: Optional[Call], e: Echo) -> None:
    if c is not None:
        m.echoes.setdefault(id(c), []).append(e)


def check_echo(m: Model, c: Call) -> None:
    """R27: an echo for an ok register, send, read with mail or broadcast, never for a refusal,
    an empty read or another tool."""
    echoes = m.echoes.pop(id(c), [])
    if not echoes:
        return
    m.judged += 1
    ok_echo = c.ok and c.tool in ECHOING_TOOLS and not c.outcome.refused
    ok_echo = ok_echo and not (c.tool == "read" and c.outcome.drained is None and c.outcome.page is None)
    if not ok_echo:
        text = echoes[0].text
        m.surprise(f"transcript echo of {c.session}'s chat_{c.tool} (step {c.step})",
                   "no echo (a refused, empty or quiet call leaves none)", repr(text[:120]),
                   c.witness() + echoes[:1])
    elif not all(x.text.startswith(ECHO_PREFIX) for x in echoes):
        m.surprise(f"transcript echo of {c.session}", "a [chat] line", repr(echoes[0].text),
                   c.witness())


def cut(m: Model, c: Call) -> None:
    """A call its process died inside: whatever it did may or may not have committed."""
    ids = [sid for sid in m.identities(c)[0] if sid]
    m.pending.pop(id(c), None)
    if c.tool in ("send", "broadcast"):
        m.ghosts.add(c.body)
    elif c.tool == "read":
        for sid in ids:
            m.box(sid).blur()
        m.blurred_reads.update(m.view.names.label_of.get(sid, sid) for sid in ids)
        m.blurred_reads.add(c.session or "")
    elif c.tool in ("register", "unregister"):
        for sid in ids:
            m.know(sid, None)
            m.tomb[sid] = None
    m.changes += 1


def prune_blur(m: Model) -> None:
    """After a jump past the 7-day TTLs the prune may have taken any row, tombstone or unread
    message of an absent session (R26): the model forgets them until it sees them again."""
    for sid in list(m.reg):
        if m.reg[sid] is not False:
            m.reg[sid] = None
        if m.tomb.get(sid):
            m.tomb[sid] = None
        box = m.box(sid)
        box.blur()
        box.exact = False
    m.changes += 1


def on_directory(m: Model, e: Event, open_calls: dict) -> None:
    """The events besides tool results that move the directory."""
    label = e.session
    if isinstance(e, Registered):
        opened = open_calls.get((e.proc, label))
        if opened is not None and opened.tool == "register" and e.how in AUTO_JOINS:
            # A synchronous host event inside the session's own chat_register (its echo ends the
            # turn, and the idle report sees the row the call just wrote): the observer names
            # that join after the event; the call's reply is what the model judges.
            return
        on_registered(m, e)
    elif isinstance(e, Hook):
        on_hook(m, e)
    elif isinstance(e, (QuietLeave, LeaveBlur)) or (
            isinstance(e, Leave) and e.proc is None and m.view.disturbances.asleep(e.t)):
        # A step inside a machine sleep runs late or never: the leave may or may not have happened.
        for sid in m.view.names.ids.get(label or "", ()):
            m.tomb[sid] = None
            if isinstance(e, (Leave, LeaveBlur)):
                m.reg[sid] = None
    elif isinstance(e, Leave):
        drop_anchors(m, label)
        for sid in m.view.names.ids.get(label or "", ()):
            if m.reg.get(sid) is not False:
                m.know(sid, False)
                m.tomb[sid] = True
                m.leaves.append((sid, e))
    elif isinstance(e, Fork):
        drop_anchors(m, label)
        m.blur_label(label)
        m.blur_label(e.older_as)
    elif isinstance(e, (Status, UserPrompt)):
        maybe_joined(m, label)
    elif isinstance(e, ProcessStart):
        for who in (e.resumed, e.opens):
            maybe_joined(m, who)
    elif isinstance(e, Sample) and not open_calls:
        learn_sample(m, e)


def learn_sample(m: Model, e: Sample) -> None:
    """A database read: the rows of the sessions whose id the model can tell."""
    for lab, row in e.sessions.items():
        sid = row.session_id or next(iter(m.view.names.ids.get(lab, ())), None)
        if sid and (row.registered or len(m.view.names.ids.get(lab, ())) == 1):
            if m.reg.get(sid) is not bool(row.registered) and m.reg.get(sid) is not None:
                m.changes += 1
            m.know(sid, bool(row.registered), row.name if row.registered else None, lab)


def maybe_joined(m: Model, label: Optional[str]) -> None:
    """A session's status, prompt or startup may auto-register it (R1, R5) without the harness
    seeing it yet; never one with a leave tombstone the model is sure of (R7)."""
    for sid in m.view.names.ids.get(label or "", ()):
        if m.reg.get(sid) is False and m.tomb.get(sid) is not True:
            m.reg[sid] = None


# The harness's names for an automatic join it saw (opencode): at a first prompt, at an idle.
AUTO_JOINS = ("first-prompt", "idle")


def no_auto_join(view: RunView, e: Registered) -> Optional[str]:
    """Why the design forbids the automatic join `e` (None: it may happen): a child session never
    auto-registers (R1), unless a plugin reload made the runtime forget it is one; nor does any
    session of a process whose `chat.autoRegister` is false then (R30: re-read per event). Judged
    only for a session's first registration in the run, with no 002-era row of its own."""
    label, proc = e.session, e.proc
    spec = next((p for p in getattr(view.spec, "processes", []) if p.id == proc), None)
    session = next((x for x in getattr(spec, "sessions", []) if x.id == label), None) if spec else None
    if session is None or any(getattr(r, "session", None) == label for r in getattr(view.spec, "legacy", []) or []):
        return None
    if any(x.i < e.i for x in view.history.of(REGISTERED, session=label)) or any(
            label in x.sessions and x.sessions[label].registered for x in view.history.of(SAMPLE) if x.i < e.i):
        return None
    # A plugin reload forgets which sessions are children (the later design's machinery incident).
    reloaded = any(st.action == "reload" and st.args.process == proc and view.disturbances.landed(k, st.at) <= e.t
                   for k, st in enumerate(view.steps))
    if getattr(session, "parent", None) and not reloaded and not getattr(session, "machinery", False):
        return "a child (sub-agent) session never auto-registers (R1)"
    if not auto_register_may_be_on(view, spec, e.t):
        return f"{proc} runs with chat.autoRegister false (R30)"
    return None


def auto_register_may_be_on(view: RunView, spec, t: int) -> bool:
    """Whether process `spec`'s `chat.autoRegister` may be true at virtual time `t` (R30: re-read per event,
    so the latest `config` edit before `t` counts, and one landing at `t` itself may count or not)."""
    values = {spec.config.auto_register}
    for k, st in enumerate(view.steps):
        new = getattr(st.args, "auto_register", None) if st.action == "config" and st.args.process == spec.id else None
        at = view.disturbances.landed(k, st.at) if new is not None else None
        if at is not None and at < t:
            values = {new}
        elif at is not None and at == t:
            values |= {new}
    return values != {False}


def startup_mismatch(view: RunView, e: Registered) -> Optional[str]:
    """Why the design forbids the startup registration `e` (None: it may happen). A resumed process
    registers at startup the session its command line opens (R5: `-s ID` that one, `-c` the newest
    top-level session of the directory, by the simulator's own reading of the command line): none
    when it opens none or while its `chat.autoRegister` is false (R30), and never a sub-agent child
    (R1). Which of two top-level sessions listed at the same instant is the newest is left open."""
    inc = view.hosting.inc_of(e)
    start = inc.start_event if inc is not None else None
    if start is None or start.opens is ABSENT:
        return None
    if start.opens is None:
        return f"its command line ({start.how}) opens no session: no top-level one is listed (R5)"
    spec = next((p for p in getattr(view.spec, "processes", []) if p.id == e.proc), None)
    if spec is not None and not auto_register_may_be_on(view, spec, e.t):
        return f"{spec.id} runs with chat.autoRegister false: its startup path registers nothing (R5, R30)"
    label = e.session
    if label in view.children and label != start.opens:
        return f"-c continues the newest top-level session ({start.opens}), never a sub-agent child (R1, R5)"
    return None


def on_registered(m: Model, e: Registered) -> None:
    label, how = e.session, e.how
    if how == "explicit":
        return  # the register reply says it
    if how == "adopt":
        m.blur_label(label)
    sid = e.session_id or next(iter(m.view.names.ids.get(label or "", ())), None)
    if sid and m.tomb.get(sid) is True:
        m.surprise(f"{label} joined again ({how})", "no automatic join: its leave tombstone sticks (R7)",
                   f"registered as {e.name}", [e])
    why_not = (no_auto_join(m.view, e) if how in AUTO_JOINS
               else startup_mismatch(m.view, e) if how == "startup" else None)
    if why_not:
        m.surprise(f"{label} joined automatically ({how})", f"no automatic join: {why_not}",
                   f"registered as {e.name}", [e])
    if sid:
        m.know(sid, True, e.name, label)
        m.tomb[sid] = False


def on_hook(m: Model, e: Hook) -> None:
    """An MCP hook's line: the conversation's name and unread count (R31), or the leave line (R7)."""
    label, line = e.session, e.line or ""
    sids = [sid for sid in m.view.names.ids.get(label or "", ()) if sid.startswith(MCP_ID_PREFIX)]
    inc = m.view.hosting.inc_of(e)
    anchoring = e.hook in ANCHORING_HOOKS and inc is not None and anchors_identity(inc.kind)
    if anchoring:
        m.anchors.pop(id(inc), None)  # re-set below only by a line that shows the anchor is sure
    if e.decision == "crashed":
        m.blur_label(label)
        return
    turn_end_mail_check(m, e)
    shown = decode_hook_line(line)
    if shown.kind == IDENTITY and sids:
        # The label's ids include those of forks still to come (a fork gives the conversation a new
        # host id, so a new mcp id): the line speaks for the id in use now.
        future = {mcp_session_id(f.new_host_id) for f in m.view.history.of(FORK, session=label)
                  if f.i > e.i and f.new_host_id}
        sid = ([s for s in sids if s not in future] or sids)[-1]
        if m.tomb.get(sid) is True:
            m.surprise(f"{label}'s hook line", "the leave line (its tombstone sticks, R7)", line[:120], [e])
        m.know(sid, True, shown.name, label)
        m.tomb[sid] = False
        if anchoring:
            m.anchors[id(inc)] = (label, sid, e.t)
        # In a concurrent wave another process's send, broadcast or read may have landed before
        # the hook or after it (the merge orders the wave by process): its count is not judged.
        racy = any(x.tool in MUTATING for x in m.overlapping_event(e))
        if len(sids) == 1 and not m.loose and not racy:
            replies.mail_count(m, None, sid, shown.unread, f"{label}'s hook line ({e.hook})", [e])
    elif shown.kind == LEFT:
        for sid in sids:
            m.know(sid, False)
            m.tomb[sid] = True


def anchors_identity(kind: str) -> bool:
    """R32: does a host kind's MCP server resolve identity by the parent-pid anchor its hooks
    record? An MCP host that trusts a claimed `as` (Cursor) does not."""
    return HOSTS[kind].mcp and not HOSTS[kind].trusts_as


def drop_anchors(m: Model, label: Optional[str]) -> None:
    """A fork (a new conversation id, adopted only at the next hook) or a leave (the anchor then
    resolves to no row) makes `label`'s anchors unsure."""
    for key in [k for k, anchor in m.anchors.items() if anchor[0] == label]:
        del m.anchors[key]


def turn_end_mail_check(m: Model, e: Hook) -> None:
    """R36: Claude Code's Stop hook never blocks a stop that a block of its own already continued
    (`stop_hook_active`), and Cursor's stop hook never follows up after an aborted or errored turn."""
    label = e.session
    m.judged += e.stop_hook_active is not None or e.status is not None
    if e.stop_hook_active and e.decision == "block":
        m.surprise(f"{label}'s Stop hook (stop_hook_active)", "no block: the turn a reminder continued may end (R36)",
                   f"blocked: {(e.line or '')[:80]}", [e])
    if e.status not in (None, "completed") and e.decision == "followup":
        m.surprise(f"{label}'s stop hook after a turn that ended {e.status}",
                   "no follow-up after an aborted or errored turn (R36)", f"followed up: {str(e.line)[:80]}",
                   [e])
