"""The author's labels: what a scenario calls its processes and sessions (h1, alice, laptop-tab).

A label is a letter, then letters, digits, `_` or `-`. Every form of it (the
whole-label pattern the model and the JSON Schema check, a replicated block's
`{i}` form, the `{label}` placeholder in expected texts and claims) is built
here from that one rule, so the language, its validator, the fake hosts and
the judges cannot read a label differently. No project imports: every part
of the simulator may use it.
"""

from __future__ import annotations

import re

_FIRST = "[A-Za-z]"
_REST = "[A-Za-z0-9_-]"
# One label, unanchored: the piece the other forms embed.
LABEL = f"{_FIRST}{_REST}*"
# A whole label (pydantic `pattern=` and the JSON Schema text: ^[A-Za-z][A-Za-z0-9_-]*$).
LABEL_PATTERN = f"^{LABEL}$"
# A label as a replicated block may write it: `{i}` stands anywhere after the first letter (w{i} -> w1, w2, ...).
BLOCK_LABEL_PATTERN = "^" + _FIRST + "(" + _REST + r"|\{i\})*$"
# `{label}` in an expected text (and a claimed `as`, a `cli_tail.who`): the name that session went by
# at the time checked; group 1 is the label. validate.py refuses one naming no declared session.
LABEL_PLACEHOLDER = re.compile(r"\{(" + LABEL + r")\}")
