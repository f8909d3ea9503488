"""Cross-reference checks that run after the model validates.

The pydantic model checks each field on its own; these checks need the whole
scenario: labels used in steps and expectations must be declared, labels are
unique, steps are in time order and inside `duration`, faults only target
what they can act on, a step `expect:` sits only on a step that leaves a reply
(D-validate-2), and each point expectation's body holds only the keys its
kind reads, with values of the right type (D-validate-3), and a `hook_line`
names a hook its session's host runs (D-validate-4), and a `resume`'s
`argv` is a non-empty list of strings whose only placeholder is `{id}`
(D-validate-5), a `{label}` placeholder names a declared session
(D-language-1), only an opencode session is resumed (D-language-3), the
windowed, database and `same_name` expectations say when and what they judge
and `before_catch_up` sits at a sleep's end (D-language-6 .. 9). Each error
points at the offending key with file:line, in the same `FILE:LINE: key path:
problem — fix` shape as the loader.

`check_spec` runs the same checks on a Scenario built in Python (no file, no
lines), so the API refuses the same mistakes.
"""

from __future__ import annotations

import difflib
import re
from typing import Any, Optional

from simulator.scenario.bounds import bounds_problems
from simulator.scenario.durations import format_duration
from simulator.scenario.errors import (
    BadValueError, CrossReferenceError, KeyPath, ScenarioError, UnknownKeyError, did_you_mean,
)
from simulator.scenario.expectation_keys import REQUIRED_KEYS, moments_of, window_of
from simulator.scenario.fault_checks import fault_problems
from simulator.scenario.interleave_checks import interleave_problems
from simulator.scenario.policies import policy_problems
from simulator.scenario.expectation_keys import expectation_body_problems, hook_line_host_problems
from simulator.scenario.kinds import (
    ARGV_PLACEHOLDER, HOOK_REPLY_ACTIONS, HOSTS, OPENCODE, PROCESS_ARG_KEYS, REPLY_ACTIONS, SESSION_ARG_KEYS, STEPS,
    hosts_with,
)
from simulator.scenario.labels import LABEL_PLACEHOLDER
from simulator.scenario.model import PROPERTY_IDS, REPLY_TEXT_KEYS, AllExcept, Expectation, Scenario, Step
from simulator.scenario.positions import LoadedScenario, Positions

HOOK_KINDS = hosts_with("hooks")  # hosts whose `prompt` prints a hook line (a step reply)


def _kinds_text(trait: str, joiner: str = " or ") -> str:
    """The host kinds with `trait`, for a hint ("opencode or cursor")."""
    return joiner.join(hosts_with(trait))


class _Checker:
    def __init__(self, spec: Scenario, positions: Optional[Positions], file: str, units_required: bool = False) -> None:
        self.spec, self.positions, self.file = spec, positions, file
        self.units_required = units_required
        self.errors: list[ScenarioError] = []
        self.procs = {p.id: p for p in spec.processes}
        self.session_proc = spec.session_labels()

    def error(self, path: KeyPath, problem: str, hint: str, cls: type[ScenarioError] = CrossReferenceError) -> None:
        line = self.positions.line_of(path)[0] if self.positions else None
        self.errors.append(cls(problem, file=self.file, line=line, key_path=path, hint=hint))

    def _suggest(self, label: str, defined: list[str], what: str) -> str:
        listing = ", ".join(defined) if defined else "none yet: declare one under processes"
        return (did_you_mean(label, defined, listing=f"defined {what}: {listing}")
                or f"write one of the defined {what}: {listing}")

    def session_ref(self, path: KeyPath, label: Any) -> None:
        if isinstance(label, str) and label not in self.session_proc:
            self.error(path, f"undefined session `{label}`", self._suggest(label, list(self.session_proc), "sessions"))

    def process_ref(self, path: KeyPath, label: Any) -> bool:
        if isinstance(label, str) and label not in self.procs:
            self.error(path, f"undefined process `{label}`", self._suggest(label, list(self.procs), "processes"))
            return False
        return True

    def placeholders(self, path: KeyPath, text: Any) -> None:
        """Each `{word}` in an expanded text must name a declared session: an
        unknown one would stay literal, and a `not_contains` would pass on a typo."""
        for word in LABEL_PLACEHOLDER.findall(text) if isinstance(text, str) else ():
            if word in self.session_proc:
                continue
            defined = ", ".join(f"{{{label}}}" for label in self.session_proc) or "none declared"
            close = difflib.get_close_matches(word, list(self.session_proc), n=1, cutoff=0.6)
            hint = (f"did you mean `{{{close[0]}}}`? (`{{label}}` is a declared session's name: {defined})" if close
                    else f"write a declared session's label in braces ({defined}), or drop the braces")
            self.error(path, f"`{{{word}}}` names no declared session, so it would stay literal text", hint)

    # -- declarations ------------------------------------------------------

    def declarations(self) -> None:
        seen_proc: dict[str, int] = {}
        seen_sess: dict[str, str] = {}
        for i, proc in enumerate(self.spec.processes):
            if proc.id in seen_proc:
                self.error(("processes", i, "id"),
                           f"duplicate process label `{proc.id}` (also processes[{seen_proc[proc.id]}])",
                           "give every process its own label")
            seen_proc.setdefault(proc.id, i)
            for j, sess in enumerate(proc.sessions):
                if sess.id in seen_sess:
                    self.error(("processes", i, "sessions", j, "id"),
                               f"duplicate session label `{sess.id}` (also in process {seen_sess[sess.id]})",
                               "give every session its own label, across all processes")
                seen_sess.setdefault(sess.id, proc.id)
            own = [s.id for s in proc.sessions]
            for j, sess in enumerate(proc.sessions):
                if sess.parent is None:
                    continue
                path = ("processes", i, "sessions", j, "parent")
                if sess.parent == sess.id:
                    self.error(path, f"session `{sess.id}` is its own parent",
                               "name another session of the same process")
                elif sess.parent not in own:
                    where = (f"a session of process {self.session_proc[sess.parent]}"
                             if sess.parent in self.session_proc else "undefined")
                    self.error(path, f"parent `{sess.parent}` is {where}, not a session of process {proc.id}",
                               "a parent must be hosted by the same process: write one of "
                               f"{', '.join(o for o in own if o != sess.id) or '(none: add it)'}")

    # -- steps ---------------------------------------------------------------

    def steps(self) -> None:
        prev_at: Optional[int] = None
        names: dict[str, int] = {}
        for i, step in enumerate(self.spec.steps):
            base: KeyPath = ("steps", i)
            if prev_at is not None and step.at < prev_at:
                prev_line = self.positions.line_of(("steps", i - 1, "at"))[0] if self.positions else None
                at_prev = f"{format_duration(prev_at)}" + (f", line {prev_line}" if prev_line else "")
                self.error(base + ("at",),
                           f"step at {format_duration(step.at)} comes before the previous step ({at_prev})",
                           "list steps in time order (equal times are fine)")
            prev_at = step.at if prev_at is None else max(prev_at, step.at)
            if step.at > self.spec.duration:
                self.error(base + ("at",),
                           f"step at {format_duration(step.at)} is after the scenario's duration "
                           f"({format_duration(self.spec.duration)})",
                           "raise `duration` or move the step earlier")
            if step.name is not None:
                if step.name in names:
                    self.error(base + ("name",), f"duplicate step name `{step.name}` (also steps[{names[step.name]}])",
                               "give every named step its own name")
                names.setdefault(step.name, i)
            self.step_refs(base, step)
            if step.expect is not None:
                self.step_expect(base, step)
                for key in REPLY_TEXT_KEYS:
                    self.placeholders(base + ("expect", key), getattr(step.expect, key))

    def step_refs(self, base: KeyPath, step: Step) -> None:
        action, args = step.action, step.args
        if not hasattr(args, "model_dump"):
            return  # cli_list / cli_tail take free-form options, no labels
        fields = args.model_dump(by_alias=True)
        path = base + (action,)
        for key in SESSION_ARG_KEYS if action != "cli_tail" else ():  # its from/to are name texts
            self.session_ref(path + (key,), fields.get(key))
        for key in PROCESS_ARG_KEYS:
            self.process_ref(path + (key,), fields.get(key))
        if action in ("resume", "restart", "start"):
            key = "into" if action == "restart" else "process"
            self.never_started(path + (key,), fields[key], action)
        if action == "interleave":
            self.interleave_refs(path, step.args)
        if action == "resume":
            self.resume_args(path, step)
            self.resumed_kind(path, fields["session"], fields["process"])
        if action in ("send", "read"):
            self.placeholders(path + ("as",), fields.get("as"))
        if action == "cli_tail":
            for key in ("from", "to"):
                self.placeholders(path + (key,), fields.get(key))
        self.host_limits(path, step, fields)

    def interleave_refs(self, path: KeyPath, args: Any) -> None:
        """The labels inside an interleave step: its pause's and each run call's."""
        self.session_ref(path + ("pause", "session"), args.pause.session)
        self.process_ref(path + ("pause", "process"), args.pause.process)
        for n, entry in enumerate(args.run):
            action, call_args = entry.call()
            fields = call_args.model_dump(by_alias=True)
            for key in SESSION_ARG_KEYS:
                self.session_ref(path + ("run", n, action, key), fields.get(key))
            if self.process_ref(path + ("run", n, action, "process"), fields.get("process")) and action == "resume":
                self.never_started(path + ("run", n, action, "process"), fields["process"], action)

    def host_limits(self, path: KeyPath, step: Step, fields: dict[str, Any]) -> None:
        """A fault that needs a host trait (simulator/scenario/kinds.py) names a host that has it."""
        action, needs = step.action, step.kind.needs
        if (action == "restart" and fields["process"] in self.procs
                and not step.kind.accepts(self.procs[fields["process"]].kind)):
            kind = self.procs[fields["process"]].kind
            self.error(path + ("process",), f"restart of `{fields['process']}`, a {kind} process",
                       f"restart models the {_kinds_text(needs)} daemon: name an {_kinds_text(needs)} process "
                       "(use `kill` for other kinds)")
        if action == "fork" and fields["session"] in self.session_proc:
            kind = self.procs[self.session_proc[fields["session"]]].kind
            if not step.kind.accepts(kind):
                self.error(path + ("session",), f"fork of `{fields['session']}`, a session of a {kind} process",
                           "fork models a Claude Code session-id fork: "
                           f"name a session of a {_kinds_text(needs)} process")
        if action == "fork" and fields.get("older_as"):
            self.older_label(path + ("older_as",), step)
        if action == "reload" and fields["process"] in self.procs:
            kind = self.procs[fields["process"]].kind
            if not step.kind.accepts(kind):
                self.error(path + ("process",), f"reload of `{fields['process']}`, a {kind} process",
                           f"a reload models the {_kinds_text(needs)} plugin: name an {_kinds_text(needs)} process")
        if action == "crash" and fields["process"] in self.procs:
            kind = self.procs[fields["process"]].kind
            if not step.kind.accepts(kind):
                others = " or ".join(k for k in HOSTS if not HOSTS[k].has(needs))
                self.error(path + ("process",), f"crash point in `{fields['process']}`, a {kind} process",
                           f"crash points run inside {_kinds_text(needs)} processes: use `kill` for a {others} host")

        if action == "stall" and fields["process"] in self.procs:
            kind = self.procs[fields["process"]].kind
            if not step.kind.accepts(kind):
                self.error(path + ("process",), f"stall of `{fields['process']}`, a {kind} process",
                           f"a stall loses a poll timer: name an {_kinds_text(needs)} process (a {kind} host "
                           "runs no poller)")

    def older_label(self, path: KeyPath, step: Step) -> None:
        """`fork.older_as` names a new label: not a declared session's, not another fork's."""
        label = step.args.older_as
        declared = {s.id for p in self.spec.processes for s in p.sessions}
        if label in declared:
            self.error(path, f"`{label}` is already a declared session",
                       "name the older id with a label of its own (e.g. `" + step.args.session + "-before`)")
        elif any(other.action == "fork" and other.args.older_as == label
                 for other in self.spec.steps[:self.spec.steps.index(step)]):
            self.error(path, f"`{label}` already names the older id of an earlier fork",
                       "give each fork's older id its own label")

    def older_label_used_early(self) -> None:
        """A step may target a fork's older id only after that fork."""
        forks = {s.args.older_as: i for i, s in reversed(list(enumerate(self.spec.steps)))
                 if s.action == "fork" and s.args.older_as}
        for i, step in enumerate(self.spec.steps):
            kind = step.kind
            label = kind.actor(step.args) if kind.actor_key else None
            if label in forks and i <= forks[label]:
                self.error(("steps", i, step.action, kind.actor_key),
                           f"`{label}` is the older id of the fork at steps[{forks[label]}], which has not happened "
                           "by this step", f"move the step after steps[{forks[label]}], or target "
                           f"`{self.spec.steps[forks[label]].args.session}`")

    def resumed_kind(self, path: KeyPath, session: str, process: str) -> None:
        """A resume starts an opencode process on an opencode session id (`-s <ses_...>`):
        a Claude Code or Cursor session resumed there would run and then fail P6 for the
        wrong reason (D-language-3)."""
        home = self.procs.get(self.session_proc.get(session, ""))
        if home is None or HOSTS[home.kind].resumes:
            return
        how = ("its id forks with `fork`" if HOSTS[home.kind].forks
               else "its conversation stays in its workspace process")
        resumers = _kinds_text("resumes")
        self.error(path + ("session",), f"`{session}` is a session of {home.id}, a {home.kind} process, "
                   f"which an {resumers} process (`{process}`) cannot resume",
                   f"resume an {resumers} session; a {home.kind} session continues in its own host ({how})")

    def resume_args(self, path: KeyPath, step: Step) -> None:
        """`argv`: a non-empty list of strings whose only placeholder is `{id}`,
        instead of (not with) `how`; `listing`: declared session labels (D-validate-5)."""
        args = step.args
        for j, label in enumerate(args.listing or ()):
            self.session_ref(path + ("listing", j), label)
        argv = args.argv
        if argv is None:
            return
        form = "write the command line as a list of strings, e.g. [opencode, \"--session={id}\"]"
        if not isinstance(argv, list):
            self.error(path + ("argv",), f"{argv!r} is not a list of arguments", form, BadValueError)
            return
        if not argv:
            self.error(path + ("argv",), "an empty command line", "write at least the program: [opencode, ...] "
                       "(or drop `argv` for the default `opencode -s <id>` / `opencode -c`)", BadValueError)
        if "how" in args.model_fields_set:
            self.error(path + ("how",), "`how` and `argv` both given; `argv` is the whole command line",
                       "drop `how` (write the flag in `argv`, e.g. [opencode, -c])")
        for j, item in enumerate(argv):
            where = path + ("argv", j)
            if isinstance(item, dict) and len(item) == 1 and next(iter(item.values())) is None:
                # YAML read an unquoted `{id}` as a mapping.
                key = next(iter(item))
                self.error(where, f"`{{{key}}}` unquoted is a YAML mapping, not text", f'quote it: "{{{key}}}"',
                           BadValueError)
            elif not isinstance(item, str):
                self.error(where, f"{item!r} is not a string", "write each argument as a string (quote numbers)",
                           BadValueError)
            else:
                for word in re.findall(r"\{[^{}]*\}", item):
                    if word != ARGV_PLACEHOLDER:
                        self.error(where, f"unknown placeholder `{word}` in `{item}`",
                                   f"`{ARGV_PLACEHOLDER}` (the resumed session's id) is the only placeholder",
                                   BadValueError)

    def step_expect(self, base: KeyPath, step: Step) -> None:
        """A step `expect:` needs a reply to judge: a tool result, or the hook
        line a prompt prints on an MCP host. Anything else would fail every run
        with "no reply recorded", so it is refused here instead."""
        action = step.action
        if step.expect.silent is not None:
            self.silent_expect(base, step)
        if action in REPLY_ACTIONS:
            return
        if action in HOOK_REPLY_ACTIONS:
            proc = self.procs.get(self.session_proc.get(step.args.session, ""))
            if proc is None or proc.kind in HOOK_KINDS:
                return  # an undefined session is reported on its own
            self.error(base + ("expect",), f"`expect:` on a prompt to `{step.args.session}`, a session of an "
                       f"{proc.kind} process, which prints no hook line to check",
                       "use a point expectation under the top-level `expect:` instead (e.g. `- at: 2m` with "
                       f"`registered: {{session: ...}}`), or prompt a {_kinds_text('hooks')} session")
            return
        what = f"a `{action}` fault" if step.is_fault else f"a `{action}` step"
        if action == "retry":
            self.error(base + ("expect",), "`expect:` on a `retry` fault, which repeats a call of another step",
                       "check the repeated calls' replies with a point expectation under the top-level `expect:`: "
                       "`- replies: {step: <this step's index or name>, contains: ...}`")
            return
        self.error(base + ("expect",), f"`expect:` on {what}, which produces no reply to check",
                   "use a point expectation under the top-level `expect:` instead (e.g. `- at: 2m` with "
                   f"`registered: {{session: ...}}`); only {', '.join(REPLY_ACTIONS)} steps and prompts "
                   f"on {_kinds_text('hooks')} sessions have a reply")

    def silent_expect(self, base: KeyPath, step: Step) -> None:
        """`silent:` judges a prompt's hook output: a tool step always replies, and a text key
        beside `silent: true` could never hold."""
        where = base + ("expect", "silent")
        if step.action not in HOOK_REPLY_ACTIONS:
            self.error(where, f"`silent:` on a `{step.action}` step, which replies with a text, not hook output",
                       "use `silent:` on a `prompt` step of a claude-code or cursor session; for a tool reply "
                       "write `ok:`, `equals:`, `contains:` or `matches:`")
        elif step.expect.silent and any(getattr(step.expect, k) is not None for k in REPLY_TEXT_KEYS):
            self.error(where, "`silent: true` beside a text key: a hook that printed nothing has no text to match",
                       "keep `silent: true` alone, or drop it and match the line with `contains:`/`equals:`")

    def never_started(self, path: KeyPath, label: str, action: str) -> None:
        proc = self.procs.get(label)
        if proc is None:
            return  # already reported as undefined
        if proc.start != "never":
            self.error(path, f"{action} target `{label}` is not declared `start: never` "
                             f"(it starts at {format_duration(proc.start) if proc.start else '0s'})",
                       f"add `start: never` to process {label}: the {action} step is what starts it")
        elif action != "start" and not STEPS[action].accepts(proc.kind):
            starts = _kinds_text(STEPS[action].needs)
            self.error(path, f"{action} target `{label}` is a {proc.kind} process",
                       f"a {action} starts a new {starts} process: declare {label} with `kind: {starts}`")

    # -- expectations --------------------------------------------------------

    def expectations(self) -> None:
        for i, exp in enumerate(self.spec.expect):
            kind = exp.kind
            body = getattr(exp, kind) or {}
            path: KeyPath = ("expect", i, kind)
            # The bodies are free-form dicts in the model: their keys and value types are checked here.
            bad = expectation_body_problems(kind, body, units_required=self.units_required)
            for sub, problem, hint in bad:
                self.error(path + sub, problem, hint,
                           UnknownKeyError if problem.startswith("unknown key") else BadValueError)
            if not isinstance(body, dict):
                continue
            missing = [key for key in REQUIRED_KEYS.get(kind, ()) if key not in body]
            for key in missing:
                what, value = (("names no session", "<label>") if key == "session"
                               else (f"has no `{key}`", "[<time>, <time>]"))
                self.error(path, f"the `{kind}` expectation {what}", f"add `{key}: {value}` under `{kind}`")
            self.expectation_refs(path, kind, body)
            if not bad and not missing:
                self.expectation_times(("expect", i), exp, body)

    def expectation_refs(self, path: KeyPath, kind: str, body: dict) -> None:
        """The labels and `{label}` texts a body names."""
        for key in ("session", "from", "to", "pruned", "tombstone"):
            if key in body:
                self.session_ref(path + (key,), body[key])
        if isinstance(body.get("process"), str):
            self.process_ref(path + ("process",), body["process"])
        if kind in ("hook_line", "hooks") and isinstance(body.get("session"), str):
            self.hook_line_host(path, body)
        if kind == "replies" and "step" in body:
            self.replied_step(path + ("step",), body["step"])
        for key in ("active", "stale"):
            labels = body.get(key)
            for j, label in enumerate(labels if isinstance(labels, list) else []):
                self.session_ref(path + (key, j), label)
        for key in REPLY_TEXT_KEYS:
            self.placeholders(path + (key,), body.get(key))

    def replied_step(self, path: KeyPath, ref: Any) -> None:
        """A `replies` expectation names a step that records replies: a tool or CLI step, or a `retry`
        fault (each repeated call's reply carries the fault's index)."""
        steps = self.spec.steps
        if isinstance(ref, str):
            index = next((i for i, step in enumerate(steps) if step.name == ref), None)
            if index is None:
                named = [step.name for step in steps if step.name]
                self.error(path, f"no step is named `{ref}`", self._suggest(ref, named, "step names")
                           if named else "give the step `name: " + ref + "`, or write its index (0 is the first)")
                return
        else:
            index = ref if isinstance(ref, int) and 0 <= ref < len(steps) else None
            if index is None:
                self.error(path, f"there is no step {ref!r} (the scenario has {len(steps)} steps)",
                           f"write an index from 0 to {len(steps) - 1}, or a step's `name:`")
                return
        step = steps[index]
        if step.action not in REPLY_ACTIONS and step.action != "retry":
            what = f"a `{step.action}` fault" if step.is_fault else f"a `{step.action}` step"
            self.error(path, f"step {index} is {what}, which records no reply",
                       f"name a tool or CLI step ({', '.join(REPLY_ACTIONS)}) or a `retry` fault")

    def expectation_times(self, path: KeyPath, exp: Expectation, body: dict) -> None:
        """`at` against the body's own times (`between`, `same_name.at`), `before_catch_up`
        against the sleeps, and every time inside the run."""
        kind, end = exp.kind, self.spec.duration + self.spec.drain
        own = "between" if "between" in body else ("at" if kind == "same_name" else None)
        if own is not None and "at" in exp.model_fields_set:
            self.error(path + ("at",), f"`at` on a `{kind}` expectation that gives its own times (`{kind}.{own}`)",
                       f"drop this `at`: `{kind}.{own}` says when it is judged")
        times = list(window_of(body) or ()) + [t for t in (moments_of(body) if kind == "same_name" else [])
                                               if t != "end"]
        for t in times:
            if t > end:
                self.error(path + (kind, own),
                           f"{format_duration(t)} is after the end of the run "
                           f"({format_duration(end)}: duration + drain)",
                           "write times inside the run, or `end`" if kind == "same_name"
                           else "write a window inside the run")
                break
        if exp.before_catch_up:
            self.before_catch_up(path, exp, own)

    def before_catch_up(self, path: KeyPath, exp: Expectation, own: Optional[str]) -> None:
        """`before_catch_up` is an observation at the instant a sleep ends; anywhere else it means nothing."""
        wakes = {s.at + s.sleep.duration: s for s in self.spec.steps if s.action == "sleep"}
        if own is not None or exp.at == "end":
            self.error(path + ("before_catch_up",),
                       f"`before_catch_up` on an expectation {'with `' + own + '`' if own else 'at `end`'}",
                       "put it on an expectation whose `at` is the instant a sleep ends")
        elif exp.at not in wakes:
            ends = ", ".join(f"the sleep at {format_duration(s.at)} for {format_duration(s.sleep.duration)} "
                             f"ends at {format_duration(t)}"
                             for t, s in sorted(wakes.items()))
            self.error(path + ("before_catch_up",),
                       f"`before_catch_up` at {format_duration(exp.at)}, when no sleep ends",
                       f"set `at` to a sleep's end ({ends})" if ends else "add a `sleep` step, and set `at` to its end")

    def properties(self) -> None:
        props = self.spec.properties
        if isinstance(props, AllExcept) and set(props.exclude) >= set(PROPERTY_IDS):
            self.error(("properties", "exclude"), "`exclude` lists every property, so nothing would be checked",
                       "exclude fewer, or list the few to check instead: properties: [P1, ...]")
        outcome = self.spec.expect_outcome
        checked = set(self.spec.checked_properties())
        for design, pids in (outcome.fails.items() if outcome is not None else ()):
            for j, pid in enumerate(pids):
                if pid not in checked:
                    self.error(("expect_outcome", "fails", design, j), f"{pid} is expected to fail under {design} "
                               "but the scenario does not check it", f"check it: properties: {{include: [{pid}]}}")
        self.machinery()
        self.host_ids()

    def host_ids(self) -> None:
        """A `host_id` is a Claude Code / Cursor host's own session id, one per session: an opencode
        session's id is the chat's own (`ses_...`), and two sessions with one host id are one conversation."""
        seen: dict[str, str] = {}
        for i, proc in enumerate(self.spec.processes):
            for j, sess in enumerate(proc.sessions):
                if sess.host_id is None:
                    continue
                where = ("processes", i, "sessions", j, "host_id")
                if not HOSTS[proc.kind].mcp:
                    self.error(where, f"`host_id` on {sess.id}, a session of an {proc.kind} process",
                               f"{_kinds_text('mcp')} hosts have host session ids; drop it here, or move the session "
                               "to such a process")
                elif sess.host_id in seen:
                    self.error(where, f"{sess.id} has the host id {sess.host_id!r} of {seen[sess.host_id]}",
                               "give each session its own host id (one conversation is one session; a fork's "
                               "`host_id` changes a session's id later)", BadValueError)
                seen.setdefault(sess.host_id, sess.id)

    def machinery(self) -> None:
        """A machinery child is the plugin's own child of a parent session, on an opencode host (its plugin)."""
        for i, proc in enumerate(self.spec.processes):
            for j, sess in enumerate(proc.sessions):
                if not sess.machinery:
                    continue
                if sess.parent is None:
                    self.error(("processes", i, "sessions", j, "machinery"), f"machinery child {sess.id} has no parent",
                               "add `parent: <label>`: the session the plugin made it for")
                if proc.kind != OPENCODE:
                    self.error(("processes", i, "sessions", j, "machinery"),
                               f"machinery child {sess.id} on a {proc.kind} process",
                               "machinery children are the opencode plugin's own: move it to an opencode process")

    def hook_line_host(self, path: KeyPath, body: dict) -> None:
        """A `hook_line` must be able to match: its session's host prints hook lines, and
        `hook:` names one its host runs (a typo would make `absent` / `count: 0` pass vacuously)."""
        proc = self.procs.get(self.session_proc.get(body["session"], "")) if isinstance(body["session"], str) else None
        for sub, problem, hint in hook_line_host_problems(proc.kind if proc else None, body):
            self.error(path + sub, problem, hint)


def check(loaded: LoadedScenario) -> list[ScenarioError]:
    """Every cross-reference error of a loaded scenario, in file order (its times need their units)."""
    return check_spec(loaded.spec, positions=loaded.positions, file=loaded.file, units_required=True)


def check_spec(spec: Scenario, *, positions: Optional[Positions] = None, file: str = "<scenario>",
               units_required: bool = False) -> list[ScenarioError]:
    """The same checks on a Scenario from anywhere (lines only when positions are given)."""
    checker = _Checker(spec, positions, file, units_required)
    checker.declarations()
    checker.steps()
    checker.older_label_used_early()
    checker.expectations()
    checker.properties()
    for i, row in enumerate(spec.legacy):  # a legacy row's owner must be a declared session
        checker.session_ref(("legacy", i, "session"), row.session)
    for path, problem, hint in bounds_problems(spec):  # the size of the world (D-bounds-1)
        checker.error(path, problem, hint, BadValueError)
    for path, problem, hint in fault_problems(spec):  # host steps and event streams exist on opencode only
        checker.error(path, problem, hint)
    for path, problem, hint in policy_problems(spec):  # messaging policies model opencode hosts
        checker.error(path, problem, hint)
    for path, problem, hint in interleave_problems(spec):  # a pause the run can reach, run calls it can run
        checker.error(path, problem, hint)
    return sorted(checker.errors, key=lambda e: e.line or 0)
