"""Clipper's adaptive batching: FIFO, batch size tuned by AIMD against the latency objective.

From Crankshaw et al., "Clipper: A Low-Latency Online Prediction Serving System" (NSDI 2017),
Sec. 4.3: the batch size grows by a fixed step while a batch's processing latency stays within
the latency objective (the SLO) and is cut by 10% when it does not. Clipper never drops a query
from a model's queue: past its deadline the frontend answers with a default, but the query is
still evaluated (``drop_late=True`` drops queries whose deadline has passed instead). The
objective is learned from the requests' own deadlines (deadline minus arrival).
"""

from __future__ import annotations

from adaserve.planner.baselines.fifo_queue import FifoQueue
from adaserve.planner.core import Decision, Feedback, Pending, Scheduler

__all__ = ["ClipperScheduler"]


class ClipperScheduler(Scheduler):
    name = "clipper"

    def __init__(self, *, start: int = 1, step: int = 1, backoff: float = 0.9, max_batch: int = 64,
                 drop_late: bool = False) -> None:
        if start < 1 or step < 1 or not 0.0 < backoff < 1.0 or max_batch < 1:
            raise ValueError("start, step >= 1, backoff in (0, 1) and max_batch >= 1 are required")
        self.size = float(start)
        self.step, self.backoff, self.max_batch = step, backoff, max_batch
        self.drop_late = drop_late
        self._q = FifoQueue()

    @property
    def slo_s(self) -> float | None:
        """The latency objective: the tightest deadline - arrival seen so far."""
        return self._q.slo_s

    def __len__(self) -> int:
        return len(self._q)

    def learn_objective(self, slo_s: float) -> None:
        """The objective of requests seen elsewhere: the pipeline simulator replays the batches
        the live policy judged before a run (``planner/sim/pipeline.py``), and the live policy
        had seen their requests; without it those batches would say nothing and the simulated
        batch size would start from ``start`` where the live one had grown."""
        self._q.learn_slo(slo_s)

    def add(self, item: Pending, now: float) -> None:
        self._q.push(item)

    def expire(self, now: float) -> list[Pending]:
        return self._q.expire_before(now) if self.drop_late else []

    def next_batch(self, now: float, max_size: int) -> Decision:
        expired = self.expire(now)
        return Decision(batch=self._q.pop(min(int(self.size), max_size)), expired=expired)

    def observe(self, feedback: Feedback) -> None:
        if self.slo_s is None or feedback.size < int(self.size):
            return  # a batch cut short by an empty queue says nothing about the size limit
        if feedback.exec_s > self.slo_s:
            self.size = max(1.0, self.size * self.backoff)
        else:
            self.size = min(float(self.max_batch), self.size + self.step)

    def earliest_deadline(self) -> float | None:
        return self._q.earliest_deadline()
