"""MOSEL's monitor: re-selection runs beside the planner loop, never inside it.

The paper runs a monitor process that plans the queued jobs while the worker executes earlier
ones, so the solver's 12-80 ms never sit on a request's critical path (Sec. 6, 7.3). Here the
monitor is one daemon thread fed by the planner loop: the loop hands it a task (a snapshot of the
queue and a clock value) whenever it is idle and returns at once; results are picked up on a later
loop iteration. A thread rather than a process because the selector's state must be shared with
the batch former in O(1) (``ModalitySelector.strategy``), and a pass is short: the optimized
policy's exact dynamic program takes about a millisecond for 16 queued jobs (``ilp.py``), so it
holds the GIL, and the loop's next decision, no longer than that.

This is part of the planner's I/O shell (a thread); the scheduler sees it only through the
``tasks.Tasks`` interface, and ``tasks.InlineTasks`` stands in for it where decisions must be a
pure function of their inputs (tests, replays).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from typing import Any

from .tasks import Task

log = logging.getLogger("adaserve.planner.mosel")


class Monitor:
    """Runs at most one task at a time on its own thread; finished results queue up for ``drain``."""

    inline = False

    def __init__(self, name: str = "mosel-monitor") -> None:
        self.name = name
        self._cond = threading.Condition()
        self._task: Task | None = None
        self._running = False
        self._stopped = False
        self._results: deque[Any] = deque()
        self._thread: threading.Thread | None = None

    @property
    def busy(self) -> bool:
        with self._cond:
            return self._running or self._task is not None

    def submit(self, task: Task) -> bool:
        """Hand ``task`` over; False (and nothing queued) when a task is still pending or running."""
        with self._cond:
            if self._stopped or self._running or self._task is not None:
                return False
            self._task = task
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
                self._thread.start()
            self._cond.notify()
        return True

    def drain(self) -> list[Any]:
        """Results of the tasks finished since the last call, oldest first."""
        out = []
        while self._results:
            out.append(self._results.popleft())
        return out

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Block until no task is pending or running (tests and shutdown)."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._running and self._task is None, timeout)

    def close(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._stopped or self._task is not None)
                if self._stopped:
                    return
                task, self._task, self._running = self._task, None, True
            try:
                self._run_one(task)
            finally:
                with self._cond:
                    self._running = False
                    self._cond.notify_all()

    def _run_one(self, task: Task | None) -> None:
        if task is None:
            return
        try:
            self._results.append(task())
        except Exception:
            log.exception("monitor task failed; the queue keeps its current strategies")
