"""Progress of a campaign: a bar on a terminal, plain lines in a CI log.

On a terminal one line redraws itself (`\\r`) after every run; anywhere
else (CI logs, pipes) a plain line is written at most every `every_s`
seconds, so a long campaign leaves a readable trace and not a wall of
carriage returns.
"""

from __future__ import annotations

import sys
import time
from typing import Optional, TextIO

BAR = 24


class Progress:
    """Reports runs done, failures and the rate, against a run count or a time budget."""

    def __init__(self, stream: Optional[TextIO] = None, *, total: Optional[int] = None,
                 budget_s: Optional[float] = None, tty: Optional[bool] = None, every_s: float = 30.0) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.total, self.budget_s = total, budget_s
        self.tty = self.stream.isatty() if tty is None else tty
        self.every_s = every_s
        self.started = time.monotonic()
        self.last_line = self.started
        self.drawn = False

    def _fraction(self, runs: int) -> Optional[float]:
        fractions = []
        if self.total:
            fractions.append(runs / self.total)
        if self.budget_s:
            fractions.append((time.monotonic() - self.started) / self.budget_s)
        return min(1.0, max(fractions)) if fractions else None

    def text(self, runs: int, failing: int) -> str:
        elapsed = time.monotonic() - self.started
        rate = runs / elapsed * 60 if elapsed > 0 else 0.0
        of = f"/{self.total}" if self.total else ""
        return f"{runs}{of} runs, {failing} failing, {rate:.0f} runs/min, {elapsed:.0f}s"

    def update(self, runs: int, failing: int) -> None:
        line = self.text(runs, failing)
        if self.tty:
            frac = self._fraction(runs)
            bar = "" if frac is None else "[" + "#" * round(frac * BAR) + "." * (BAR - round(frac * BAR)) + "] "
            self.stream.write(f"\r\x1b[K  explore {bar}{line}")
            self.stream.flush()
            self.drawn = True
        elif time.monotonic() - self.last_line >= self.every_s:
            self.last_line = time.monotonic()
            self.stream.write(f"explore: {line}\n")
            self.stream.flush()

    def note(self, text: str) -> None:
        """A message on its own line (a failure found, a shrink done)."""
        if self.tty and self.drawn:
            self.stream.write("\r\x1b[K")
        self.stream.write(f"explore: {text}\n")
        self.stream.flush()
        self.drawn = False

    def close(self) -> None:
        if self.tty and self.drawn:
            self.stream.write("\n")
            self.stream.flush()
        self.drawn = False
