"""Pending requests in deadline order: the queue of the earliest-deadline-first policies."""

from __future__ import annotations

import heapq
import itertools

from adaserve.planner.core import Pending

__all__ = ["DeadlineHeap"]


class DeadlineHeap:
    """A heap by deadline; ties leave in arrival order."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Pending]] = []
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, item: Pending) -> None:
        heapq.heappush(self._heap, (item.deadline, next(self._seq), item))

    def earliest(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def pop(self, n: int) -> list[Pending]:
        """The ``n`` most urgent members (fewer when the heap is smaller)."""
        return [heapq.heappop(self._heap)[2] for _ in range(min(n, len(self._heap)))]

    def expire_before(self, t: float) -> list[Pending]:
        """Remove and return every member whose deadline is before ``t``."""
        out: list[Pending] = []
        while self._heap and self._heap[0][0] < t:
            out.append(heapq.heappop(self._heap)[2])
        return out
