"""The default policy of the foundation: earliest deadline first, largest batch that fits.

Requests wait in a heap ordered by deadline. When a slot frees, the batch takes the ``k`` most
urgent requests, with ``k`` the largest size whose predicted latency still meets the earliest
deadline among them (all later ones then meet theirs too). Requests that cannot finish even in a
batch of one are expired.
"""

from __future__ import annotations

from adaserve.planner.core import Decision, Feedback, Pending, Scheduler
from adaserve.planner.deadlines import DeadlineHeap
from adaserve.planner.latency import LinearLatency


class EdfScheduler(Scheduler):
    name = "edf"

    def __init__(self, latency: LinearLatency | None = None) -> None:
        self.latency = latency or LinearLatency()
        self._q = DeadlineHeap()

    def __len__(self) -> int:
        return len(self._q)

    def add(self, item: Pending, now: float) -> None:
        self._q.push(item)

    def earliest_deadline(self) -> float | None:
        return self._q.earliest()

    def diagnose(self) -> dict[str, object]:
        return {"predict1_ms": round(self.latency.predict(1) * 1000.0, 3)}

    def expire(self, now: float) -> list[Pending]:
        return self._q.expire_before(now + self.latency.predict(1))

    def next_batch(self, now: float, max_size: int) -> Decision:
        expired = self.expire(now)
        first = self._q.earliest()
        if first is None:
            return Decision(expired=expired)
        k = self.latency.largest_within(first - now, min(max_size, len(self._q)))
        batch = self._q.pop(max(k, 1))
        return Decision(batch=batch, expired=expired, predicted_s=self.latency.predict(len(batch)))

    def observe(self, feedback: Feedback) -> None:
        self.latency.update(feedback.size, feedback.exec_s)
