"""The orchestrator's own lane of the history, and the run's dispatch counter.

Every event the orchestrator records carries the current dispatch number and
virtual time. An event that causes a dispatch carries that dispatch's number;
an event that reacts to a reply (`fresh=True`) takes a new one, so
`history.merge` puts it after the reply it reacts to.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from simulator.clock import VirtualClock
from simulator.history import ORCHESTRATOR, Recorder


class DispatchLog:
    """Numbers dispatches and records the orchestrator's events at the clock's time."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.dispatch = 0
        self._recorder: Optional[Recorder] = None

    def open(self, run_dir: Path) -> None:
        """Start the orchestrator's event file (the history directory exists by now)."""
        self._recorder = Recorder.for_process(run_dir, ORCHESTRATOR)

    @property
    def opened(self) -> bool:
        return self._recorder is not None

    def next_dispatch(self) -> int:
        self.dispatch += 1
        self._recorder.current(self.dispatch, self.clock.now)
        return self.dispatch

    def record(self, kind: str, session: Optional[str] = None, /, *, fresh: bool = False, **data: Any) -> None:
        """Record an orchestrator event (a kind of `simulator.events.ORCHESTRATOR_EVENTS`, its
        declared fields: the recorder refuses anything else)."""
        if fresh:
            self.next_dispatch()
        self._recorder.current(self.dispatch, self.clock.now)
        self._recorder.emit(kind, session, **data)

    def close(self) -> None:
        self._recorder.close()
