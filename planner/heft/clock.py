"""When each pool is free again, from its in-flight batches' predicted run times (pure).

A pool runs its batches in the order they were sent (one consumer group, FIFO), on ``slots``
workers at once. Its availability is therefore a list schedule of what is in flight: each batch
starts on the first worker free, not before it can (a part 2 not before part 1's tensor arrives).
A batch leaves when its ``batch.finished`` arrives, so the prediction corrects itself batch by
batch instead of drifting.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

STALE_S = 30.0


@dataclass(slots=True)
class _Job:
    not_before: float
    seconds: float


@dataclass
class PoolClock:
    slots: int = 1
    _jobs: dict[str, _Job] = field(default_factory=dict)  # insertion order = dispatch order

    def add(self, batch_id: str, not_before: float, seconds: float) -> None:
        self._jobs[batch_id] = _Job(not_before, max(seconds, 0.0))

    def remove(self, batch_id: str) -> bool:
        return self._jobs.pop(batch_id, None) is not None

    def __len__(self) -> int:
        return len(self._jobs)

    def __contains__(self, batch_id: object) -> bool:
        return batch_id in self._jobs

    def schedule(self, now: float) -> tuple[list[float], dict[str, tuple[float, float]]]:
        """Worker free times after everything in flight (never before ``now``), and each batch's
        predicted (start, end): a batch started when it was sent (or when its worker or input
        was ready), not now, so one halfway through counts only its remaining half."""
        free = [-math.inf] * max(self.slots, 1)
        spans: dict[str, tuple[float, float]] = {}
        for bid, job in self._jobs.items():
            t = heapq.heappop(free)
            start = max(t, job.not_before)
            end = start + job.seconds
            spans[bid] = (start, end)
            heapq.heappush(free, end)
        return sorted(max(f, now) for f in free), spans

    def available(self, now: float, stale_s: float = STALE_S) -> float:
        """The earliest time a batch sent now would start (``now`` when a worker is idle). A batch
        predicted to have ended ``stale_s`` ago whose ``batch.finished`` never came (dead-lettered,
        or its event lost) is dropped, or it would hold the pool busy for ever."""
        free, spans = self.schedule(now)
        gone = [b for b, (_, end) in spans.items() if end < now - stale_s]
        if not gone:
            return free[0]
        for b in gone:
            del self._jobs[b]
        return self.schedule(now)[0][0]
