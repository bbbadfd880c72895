"""Where the MOSEL scheduler's slow work runs: the interface, and the pure way to run it.

Re-selection and matrix builds are handed over as tasks; their results are picked up on a later
call. ``InlineTasks`` runs each task at submission, so a scheduler built with it is a pure
object: the same inputs and ``now`` give the same decisions (tests, replays, the simulator).
The live planner hands the scheduler a ``Monitor`` (``monitor.py``, part of the I/O shell),
which runs the tasks on a thread beside the loop, as the paper's monitor process does.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

log = logging.getLogger("adaserve.planner.mosel")

Task = Callable[[], Any]


class Tasks(Protocol):
    """Runs at most one task at a time; finished results queue up for ``drain``."""

    @property
    def inline(self) -> bool:
        """True when a task has finished by the time ``submit`` returns."""

    def submit(self, task: Task) -> bool:
        """Hand ``task`` over; False (and nothing queued) when one is still pending or running."""

    def drain(self) -> list[Any]:
        """Results of the tasks finished since the last call, oldest first."""

    def close(self) -> None:
        """Stop taking tasks."""


class InlineTasks:
    """Runs each task at submission, on the caller's thread."""

    inline = True

    def __init__(self) -> None:
        self._results: deque[Any] = deque()

    def submit(self, task: Task) -> bool:
        try:
            self._results.append(task())
        except Exception:  # a failed replan keeps the current strategies, as on the monitor thread
            log.exception("monitor task failed; the queue keeps its current strategies")
        return True

    def drain(self) -> list[Any]:
        out = list(self._results)
        self._results.clear()
        return out

    def close(self) -> None:
        pass
