"""A first-come-first-served queue whose members can also leave by deadline (lazy deletion).

It also keeps the tightest latency objective it has seen (a member's deadline minus its arrival):
the baselines that size batches against "the SLO" learn it from the requests themselves.
"""

from __future__ import annotations

import heapq
from collections import deque

from adaserve.planner.core import Pending

__all__ = ["FifoQueue"]


class FifoQueue:
    def __init__(self) -> None:
        self._order: deque[int] = deque()
        self._deadlines: list[tuple[float, int]] = []
        self._live: dict[int, Pending] = {}
        self._seq = 0
        self.slo_s: float | None = None

    def __len__(self) -> int:
        return len(self._live)

    def learn_slo(self, slo: float) -> None:
        """Tighten the objective to ``slo`` (seconds) when it is tighter than the one held."""
        if slo > 0:
            self.slo_s = slo if self.slo_s is None else min(self.slo_s, slo)

    def push(self, item: Pending) -> None:
        self.learn_slo(item.deadline - item.arrival)
        self._seq += 1
        self._order.append(self._seq)
        heapq.heappush(self._deadlines, (item.deadline, self._seq))
        self._live[self._seq] = item

    def _trim(self) -> None:
        while self._order and self._order[0] not in self._live:
            self._order.popleft()

    def head(self) -> Pending | None:
        self._trim()
        return self._live[self._order[0]] if self._order else None

    def pop(self, n: int) -> list[Pending]:
        """The ``n`` oldest members (fewer when the queue is shorter)."""
        out: list[Pending] = []
        while len(out) < n:
            self._trim()
            if not self._order:
                break
            out.append(self._live.pop(self._order.popleft()))
        return out

    def expire_before(self, t: float) -> list[Pending]:
        """Remove and return every member whose deadline is before ``t``."""
        out: list[Pending] = []
        while self._deadlines and self._deadlines[0][0] < t:
            _, seq = heapq.heappop(self._deadlines)
            item = self._live.pop(seq, None)
            if item is not None:
                out.append(item)
        return out

    def earliest_deadline(self) -> float | None:
        while self._deadlines and self._deadlines[0][1] not in self._live:
            heapq.heappop(self._deadlines)
        return self._deadlines[0][0] if self._deadlines else None
