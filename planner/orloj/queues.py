"""Algorithm 1's per-batch-size queues ``Q_bs``, stored once for all sizes, as arrays.

A request's expected batch latency grows with the batch size, so the sizes it can still make
are always ``1..K`` for some largest size ``K``, which only shrinks as its deadline nears. The
queues are therefore nested, and one slot per request holds all of them: ``top[slot]`` is the
index of ``K`` (``Q_bs`` = slots with ``top >= index(bs)``), and row ``i`` of ``alpha``/``beta``
is the request's score coefficients in size ``i``'s queue (score ``alpha * X + beta`` with
``X = e^{b t}``; ``beta = -inf`` outside the queue). Leaving a size is a write to ``top``,
leaving all of them is freeing the slot.

Everything that changes with time is a per-slot time, so finding what is due is one vectorised
comparison rather than a heap per event: ``drop_at`` (when the request can no longer make its
largest size) and ``next_ms[i]`` (its next milestone in size ``i``'s queue).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["SizeQueues"]


class SizeQueues:
    def __init__(self, n_sizes: int, capacity: int = 256) -> None:
        self.n = n_sizes
        self.alpha = np.zeros((n_sizes, capacity))
        self.beta = np.full((n_sizes, capacity), -np.inf)
        self.next_ms = np.full((n_sizes, capacity), np.inf)
        self.top = np.full(capacity, -1, dtype=np.int64)
        self.gid = np.zeros(capacity, dtype=np.int64)
        self.deadline = np.full(capacity, np.inf)
        self.drop_at = np.full(capacity, np.inf)
        self.decay = np.zeros(capacity)
        self.cost = np.zeros(capacity)
        self.est = np.full((capacity, n_sizes), np.inf)  # E[L_B] per size, non-decreasing
        self.items: list[Any] = [None] * capacity
        self.count = np.zeros(n_sizes, dtype=np.int64)  # members whose largest size is index i
        # ``count.sum()``, kept as a Python int: the planner asks the queue's length several times
        # per step, and a numpy sum per ask was 3.5 % of its samples (issue 15's sixth round).
        self.members_total = 0
        self._free: list[int] = list(range(capacity - 1, -1, -1))
        self.high = 0  # one past the highest slot ever used: scans cover slots [0, high)

    def _grow(self) -> None:
        old = self.top.size

        def more(a: np.ndarray, fill: float, axis: int) -> np.ndarray:
            shape = list(a.shape)
            shape[axis] = old
            return np.concatenate([a, np.full(shape, fill, dtype=a.dtype)], axis=axis)

        self.alpha, self.beta = more(self.alpha, 0.0, 1), more(self.beta, -np.inf, 1)
        self.next_ms = more(self.next_ms, np.inf, 1)
        self.top, self.gid = more(self.top, -1, 0), more(self.gid, 0, 0)
        self.deadline, self.drop_at = more(self.deadline, np.inf, 0), more(self.drop_at, np.inf, 0)
        self.decay, self.cost, self.est = more(self.decay, 0.0, 0), more(self.cost, 0.0, 0), more(self.est, np.inf, 0)
        self.items.extend([None] * old)
        self._free.extend(range(2 * old - 1, old - 1, -1))

    def alloc(self) -> int:
        return self.alloc_many(1)[1][0]

    def alloc_many(self, n: int) -> tuple[slice | np.ndarray, Sequence[int]]:
        """Slots for ``n`` requests, in their order: as an index (a slice when they are one
        ascending run, the free list's usual answer, else an index array) and as a sequence of
        ints."""
        while len(self._free) < n:
            self._grow()
        free = self._free
        lo = free[-1]
        taken = free[-n:]
        del free[-n:]
        if taken == list(range(lo + n - 1, lo - 1, -1)):
            index: slice | np.ndarray = slice(lo, lo + n)
            slots: Sequence[int] = range(lo, lo + n)
        else:
            slots = taken[::-1]
            index = np.asarray(slots, dtype=np.int64)
        self.high = max(self.high, max(slots) + 1)
        return index, slots

    def enter(self, slot: int, top: int) -> None:
        """The request in ``slot`` now belongs to the queues of sizes ``0..top`` (indices)."""
        old = int(self.top[slot])
        if old >= 0:
            self.count[old] -= 1
            self.members_total -= 1
            if top < old:
                self.beta[top + 1:old + 1, slot] = -np.inf
                self.next_ms[top + 1:old + 1, slot] = np.inf
        self.top[slot] = top
        if top >= 0:
            self.count[top] += 1
            self.members_total += 1

    def lower(self, slots: np.ndarray, tops: np.ndarray) -> None:
        """``enter`` for many slots at once, each to a smaller (or no) largest size."""
        old = self.top[slots]
        np.subtract.at(self.count, old, 1)
        keep = tops >= 0
        np.add.at(self.count, tops[keep], 1)
        self.members_total += int(keep.sum()) - len(old)
        rows = np.arange(self.n)[:, None]
        out = (rows > tops[None, :]) & (rows <= old[None, :])
        beta, nxt = self.beta[:, slots], self.next_ms[:, slots]
        beta[out], nxt[out] = -np.inf, np.inf
        self.beta[:, slots], self.next_ms[:, slots] = beta, nxt
        self.top[slots] = tops

    def release(self, slot: int) -> Any:
        """The request leaves every queue; returns what was stored with it."""
        old = int(self.top[slot])
        if old >= 0:
            self.count[old] -= 1
            self.members_total -= 1
        self.beta[:, slot] = -np.inf
        self.next_ms[:, slot] = np.inf
        self.top[slot] = -1
        self.deadline[slot] = self.drop_at[slot] = np.inf
        item, self.items[slot] = self.items[slot], None
        self._free.append(slot)
        return item

    def release_many(self, slots: np.ndarray) -> list[Any]:
        """``release`` for many slots at once."""
        if not slots.size:
            return []
        old = self.top[slots]
        left = old[old >= 0]
        # bincount: ``np.subtract.at`` cost a few us a call on the planner's loop
        self.count -= np.bincount(left, minlength=self.n)
        self.members_total -= len(left)
        self.beta[:, slots] = -np.inf
        self.next_ms[:, slots] = np.inf
        self.top[slots] = -1
        self.deadline[slots] = self.drop_at[slots] = np.inf
        idx = slots.tolist()
        items = [self.items[i] for i in idx]
        for i in idx:
            self.items[i] = None
        self._free.extend(idx)
        return items

    def members(self, i: int) -> int:
        """``|Q|`` of size index ``i``."""
        return int(self.count[i:].sum())

    def best(self, i: int, k: int, x: float) -> list[int]:
        """Slots of the ``k`` best scores at ``X = x`` in size index ``i``'s queue, best first.

        Slots outside the queue have ``beta = -inf``, so no mask is needed.
        """
        scores = self.alpha[i, :self.high] * x
        scores += self.beta[i, :self.high]
        n = scores.size
        idx = np.argpartition(scores, n - k)[n - k:] if k < n else np.arange(n)
        idx = idx[np.argsort(-scores[idx], kind="stable")]
        picked: list[int] = idx[scores[idx] > -np.inf].tolist()
        return picked

    def rebase(self, factor: float) -> None:
        self.alpha *= factor
        self.decay *= factor

    def __len__(self) -> int:
        return self.members_total
