"""The scores of a long queue as arrays, kept beside its runs (``SizeQueues.mirror``).

Ranking a queue run by run in Python costs about half a microsecond a run, and numpy's calls
cost tens of microseconds whatever their length: live, a queue holds a few dozen runs and
Python ranks it several times cheaper, but at thousands of pending runs (long deadlines, a
backlog) one ranking would take milliseconds. Past ``SizeQueues.ATTACH`` runs the queues keep
this mirror: a slot per run, each size's score coefficients and next milestone as a row of
arrays, and the run's largest size, so a ranking is a few vectorised calls over the slots.

The runs' own ``coef`` stay the truth; the mirror is written wherever they change, with the same
arithmetic, so both rankings give the same scores (and so the same batches, up to how ties fall).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from adaserve.planner.orloj.queues import Run

__all__ = ["ScoreMirror"]


class ScoreMirror:
    def __init__(self, n_sizes: int, runs: Iterable[Run], capacity: int = 256) -> None:
        self.alpha = np.zeros((n_sizes, capacity))
        self.beta = np.zeros((n_sizes, capacity))
        self.next_ms = np.full((n_sizes, capacity), -np.inf)  # -inf: never scored there, due
        self.top = np.full(capacity, -1, dtype=np.int64)  # -1: a free slot
        self.key = np.zeros(capacity, dtype=np.int64)  # the run's: ties go to the earlier filed
        self.runs: list[Run | None] = [None] * capacity
        self._free = list(range(capacity - 1, -1, -1))
        self.high = 0  # one past the highest slot ever used: scans cover slots [0, high)
        for run in runs:
            self.file(run)
            for row, c in enumerate(run.coef):
                if c is not None:
                    self.scored(run, row, c)

    def _grow(self) -> None:
        old = self.top.size
        self.alpha = np.concatenate([self.alpha, np.zeros_like(self.alpha)], axis=1)
        self.beta = np.concatenate([self.beta, np.zeros_like(self.beta)], axis=1)
        self.next_ms = np.concatenate([self.next_ms, np.full_like(self.next_ms, -np.inf)], axis=1)
        self.top = np.concatenate([self.top, np.full(old, -1, dtype=np.int64)])
        self.key = np.concatenate([self.key, np.zeros(old, dtype=np.int64)])
        self.runs.extend([None] * old)
        self._free.extend(range(2 * old - 1, old - 1, -1))

    def file(self, run: Run) -> None:
        if not self._free:
            self._grow()
        slot = run.slot = self._free.pop()
        self.runs[slot] = run
        self.top[slot], self.key[slot] = run.top, run.key
        self.next_ms[:, slot] = -np.inf
        if slot >= self.high:
            self.high = slot + 1

    def moved(self, run: Run) -> None:
        self.top[run.slot] = run.top

    def left(self, run: Run) -> None:
        slot, run.slot = run.slot, -1
        self.top[slot] = -1
        self.runs[slot] = None
        self._free.append(slot)

    def scored(self, run: Run, row: int, c: list[float]) -> None:
        slot = run.slot
        self.alpha[row, slot], self.beta[row, slot], self.next_ms[row, slot] = c

    def rebase(self, factor: float) -> None:
        self.alpha *= factor

    def due(self, i: int, now: float) -> list[Run]:
        """The runs of size index ``i``'s queue whose score there is out of date at ``now``."""
        h = self.high
        slots = np.flatnonzero((self.next_ms[i, :h] <= now) & (self.top[:h] >= i)).tolist()
        runs = self.runs
        return [runs[s] for s in slots]

    def best(self, i: int, k: int, x: float) -> list[Run]:
        """The ``k`` best-scored runs of size index ``i``'s queue at ``X = x``, best first, ties
        to the earlier filed (as the Python ranking orders them)."""
        h = self.high
        scores = self.alpha[i, :h] * x
        scores += self.beta[i, :h]
        scores[self.top[:h] < i] = -np.inf
        if k < h:  # every run that scores at least the k-th best, ties at the cut included
            idx = np.flatnonzero(scores >= np.partition(scores, h - k)[h - k])
        else:
            idx = np.arange(h)
        idx = idx[np.lexsort((self.key[idx], -scores[idx]))[:k]]
        runs = self.runs
        return [runs[s] for s in idx[scores[idx] > -np.inf].tolist()]

    def detach(self) -> None:
        """The runs forget their slots (the mirror is being dropped)."""
        for run in self.runs:
            if run is not None:
                run.slot = -1
