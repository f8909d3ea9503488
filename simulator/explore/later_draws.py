"""The later design's incidents as exploration draws: asked for by a campaign that includes P12-P14.

`explore --include-properties P12,P13,P14` judges the later design's
properties on every run, whatever the design, and then a world should give
them something to judge: the faults and host features behind the incidents.
They are drawn here, after the ordinary document, from a generator of their
own (seeded from the run seed), so the ordinary world a seed names stays the
one it always drew and only these additions differ:

- retry (EXPLORE_LATER_FAULTS): after a send or broadcast, at the same
  instant, the sender's host calls it again (its answer timed out after the
  commit);
- reload: an opencode process's plugin reloads at the time of a step;
- a machinery child: an opencode process's first session gets the plugin's
  extraction child, showing up idle at a drawn time;
- a clipping host: a process clips tool outputs at 2000 characters, and some
  of its peers' sends to it carry a body a few thousand characters long.

`explore --design thatch-later` runs every world under the later design
itself, with the same draws from the same stream (long bodies to anyone
instead of a clipping host), so its code is judged by chance as well as by
script.
"""

from __future__ import annotations

import random
from typing import Any, Optional

from simulator.design import LATER_SPLIT_PART_LEN
from simulator.explore.plan import keep_fitting
from simulator.scenario.kinds import DEFAULT_HOST, EXPLORE_LATER_FAULTS, HOSTS

LATER_PROPERTIES = ("P12", "P13", "P14")
SEND_KEYS = ("send", "broadcast")


def later_rng(seed: int) -> random.Random:
    return random.Random(f"later-{seed}")


def add_later_draws(doc: dict[str, Any], seed: int, include: tuple[str, ...], *,
                    design: Optional[str] = None) -> dict[str, Any]:
    """`doc` with `properties: {include: [...]}` (when it names some) and the later incidents' faults and
    features drawn in; with `design` (a named set of the later design's options) the world runs under it.

    Under the later design itself a clipping host is not drawn: the scripted readers drain and never page, so
    a host that hides a page's clip marker loses characters by the reader's doing, not the design's (the
    scripted incidents show that story). Long bodies go to any recipient instead, so sends split into parts."""
    rng = later_rng(seed)
    doc = {**doc, "properties": {"include": list(include)}} if include else dict(doc)
    if design is not None:
        doc["policy"] = design
    rates = {k: rng.uniform(lo, hi) for k, (_, (lo, hi)) in EXPLORE_LATER_FAULTS.items() if rng.random() < 0.7}
    features = {f for f in ("machinery", "clip") if rng.random() < 0.5}
    polling = [p for p in doc["processes"] if HOSTS[p.get("kind", DEFAULT_HOST)].polls and p.get("start") != "never"]
    if "machinery" in features and polling:
        _machinery_child(rng, rng.choice(polling), doc)
    if design is not None:
        long_to: Optional[set[str]] = {s["id"] for p in doc["processes"] for s in p["sessions"]}
    else:
        clipped = _clip(rng, polling) if "clip" in features and polling else None
        long_to = {s["id"] for p in doc["processes"] if p["id"] == clipped for s in p["sessions"]} if clipped else None
    steps = []
    for step in doc["steps"]:
        steps.append(_long_body(rng, step, long_to) if long_to else step)
        steps.extend(_faults_after(rng, step, rates, polling))
    return keep_fitting({**doc, "steps": steps})


def _machinery_child(rng: random.Random, proc: dict[str, Any], doc: dict[str, Any]) -> None:
    if not proc["sessions"]:
        return
    taken = {s["id"] for p in doc["processes"] for s in p["sessions"]}
    label = next(f"extract{n}" for n in range(1, 100) if f"extract{n}" not in taken)
    proc["sessions"].append({"id": label, "parent": proc["sessions"][0]["id"], "machinery": True,
                             "joins": "idle", "start": rng.randint(0, max(1, doc["duration"] // 1000)) * 1000})


def _clip(rng: random.Random, polling: list[dict[str, Any]]) -> Optional[str]:
    proc = rng.choice(polling)
    if not proc["sessions"]:
        return None
    proc["clip"] = LATER_SPLIT_PART_LEN
    return proc["id"]


def _long_body(rng: random.Random, step: dict[str, Any], to: set[str]) -> dict[str, Any]:
    """A send to one of `to` (the clipping host's sessions) gets a body of a few thousand characters, half the
    time."""
    args = step.get("send")
    if args is None or args.get("to") not in to or rng.random() < 0.5:
        return step
    words = f"{args['from']} handoff part "
    return {**step, "send": {**args, "body": {"repeat": words, "times": rng.randint(2500, 6000) // len(words)}}}


def _faults_after(rng: random.Random, step: dict[str, Any], rates: dict[str, float],
                  polling: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    key = next((k for k in SEND_KEYS if k in step), None)
    if key is not None and rng.random() < rates.get("retry", 0):
        out.append({"at": step["at"], "retry": {"session": step[key]["from"], "tool": key}})
    if polling and rng.random() < rates.get("reload", 0):
        out.append({"at": step["at"], "reload": {"process": rng.choice(polling)["id"]}})
    return out
