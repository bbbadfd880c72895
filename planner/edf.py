"""The default policy of the foundation: earliest deadline first, largest batch that fits.

Requests wait in a heap ordered by deadline. When a slot frees, the batch takes the ``k`` most
urgent requests, with ``k`` the largest size whose predicted latency still meets the earliest
deadline among them (all later ones then meet theirs too). Requests that cannot finish even in a
batch of one are expired.
"""

from __future__ import annotations

import heapq
import itertools

from adaserve.planner.core import Decision, Feedback, Pending
from adaserve.planner.latency import LinearLatency


class EdfScheduler:
    name = "edf"

    def __init__(self, latency: LinearLatency | None = None) -> None:
        self.latency = latency or LinearLatency()
        self._heap: list[tuple[float, int, Pending]] = []
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, item: Pending, now: float) -> None:
        heapq.heappush(self._heap, (item.deadline, next(self._seq), item))

    def earliest_deadline(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def expire(self, now: float) -> list[Pending]:
        alone = self.latency.predict(1)
        out: list[Pending] = []
        while self._heap and self._heap[0][0] < now + alone:
            out.append(heapq.heappop(self._heap)[2])
        return out

    def next_batch(self, now: float, max_size: int) -> Decision:
        expired = self.expire(now)
        if not self._heap:
            return Decision(expired=expired)
        k = self.latency.largest_within(self._heap[0][0] - now, min(max_size, len(self._heap)))
        batch = [heapq.heappop(self._heap)[2] for _ in range(max(k, 1))]
        return Decision(batch=batch, expired=expired, predicted_s=self.latency.predict(len(batch)))

    def observe(self, feedback: Feedback) -> None:
        self.latency.update(feedback.size, feedback.exec_s)
