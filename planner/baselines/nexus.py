"""Nexus: a batch size planned ahead from the profile, and early drop at dispatch.

From Shen et al., "Nexus: A GPU Cluster Engine for Accelerating DNN-Based Video Analysis"
(SOSP 2019). Squishy bin packing gives a session on a saturated GPU the largest batch ``b`` with
``2 * l(b) <= SLO`` (a request may wait one duty cycle, then run one batch), where ``l(b)`` comes
from the profile: here the mean execution time (``MeanLatency``), which is what a static profile
means for a dynamic model. At dispatch the queue is served first-come-first-served and requests
at its head that could not finish in time with the planned batch are dropped ("early drop").
"""

from __future__ import annotations

from adaserve.planner.baselines.fifo_queue import FifoQueue
from adaserve.planner.baselines.point import MeanLatency
from adaserve.planner.core import Decision, Feedback, Pending, Scheduler

__all__ = ["NexusScheduler"]


class NexusScheduler(Scheduler):
    name = "nexus"

    def __init__(self, latency: MeanLatency | None = None, *, sizes: tuple[int, ...] = (1, 2, 4, 8, 16, 32)) -> None:
        if not sizes or min(sizes) < 1:
            raise ValueError("sizes must be positive batch sizes")
        self.latency = latency if latency is not None else MeanLatency()
        self.sizes = tuple(sorted(sizes))
        self._q = FifoQueue()

    @property
    def slo_s(self) -> float | None:
        """The latency objective: the tightest deadline - arrival seen so far."""
        return self._q.slo_s

    def __len__(self) -> int:
        return len(self._q)

    def plan(self, max_size: int) -> int:
        """The planned batch size: the largest whose two batch latencies fit in the SLO."""
        best = self.sizes[0]
        for k in self.sizes:
            if k <= max_size and (self.slo_s is None or 2.0 * self.latency.predict(k) <= self.slo_s):
                best = k
        return min(best, max_size)

    def add(self, item: Pending, now: float) -> None:
        self._q.push(item)

    def diagnose(self) -> dict[str, object]:
        return {"predict1_ms": round(self.latency.predict(1) * 1000.0, 3)}

    def expire(self, now: float) -> list[Pending]:
        return self._q.expire_before(now + self.latency.predict(1))

    def next_batch(self, now: float, max_size: int) -> Decision:
        expired = self.expire(now)
        b = self.plan(max_size)
        while len(self._q):
            k = min(b, len(self._q))
            head = self._q.head()
            assert head is not None
            if now + self.latency.predict(k) <= head.deadline:
                break
            expired.extend(self._q.pop(1))
        batch = self._q.pop(b)
        return Decision(batch=batch, expired=expired, predicted_s=self.latency.predict(len(batch)) if batch else 0.0)

    def observe(self, feedback: Feedback) -> None:
        self.latency.update(feedback)

    def earliest_deadline(self) -> float | None:
        return self._q.earliest_deadline()
