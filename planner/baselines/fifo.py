"""FIFO with a fixed batch size: the plainest serving loop, as a floor for the others.

Not from a paper: the default of most serving frameworks before adaptive batching (the
"no batching policy" reference point of Clipper, Crankshaw et al., NSDI 2017). Requests are served
in arrival order, ``batch`` at a time; a request is dropped only once its deadline has passed.
"""

from __future__ import annotations

from adaserve.planner.baselines.fifo_queue import FifoQueue
from adaserve.planner.core import Decision, Feedback, Pending, Scheduler

__all__ = ["FifoScheduler"]


class FifoScheduler(Scheduler):
    name = "fifo"

    def __init__(self, *, batch: int = 8) -> None:
        if batch < 1:
            raise ValueError("batch must be at least 1")
        self.batch = batch
        self._q = FifoQueue()

    def __len__(self) -> int:
        return len(self._q)

    def add(self, item: Pending, now: float) -> None:
        self._q.push(item)

    def expire(self, now: float) -> list[Pending]:
        return self._q.expire_before(now)

    def next_batch(self, now: float, max_size: int) -> Decision:
        expired = self.expire(now)
        return Decision(batch=self._q.pop(min(self.batch, max_size)), expired=expired)

    def observe(self, feedback: Feedback) -> None:
        return None

    def earliest_deadline(self) -> float | None:
        return self._q.earliest_deadline()
