"""Algorithm 1's per-batch-size queues ``Q_bs``, stored once for all sizes, as arrays.

A request's expected batch latency grows with the batch size, so the sizes it can still make
are always ``1..K`` for some largest size ``K``, which only shrinks as its deadline nears. The
queues are therefore nested, and one slot per request holds all of them: ``top[slot]`` is the
index of ``K`` (``Q_bs`` = slots with ``top >= index(bs)``), and row ``i`` of ``alpha``/``beta``
is the request's score coefficients in size ``i``'s queue (score ``alpha * X + beta`` with
``X = e^{b t}``; ``beta = -inf`` outside the queue). Leaving a size is a write to ``top``,
leaving all of them is freeing the slot.

A slot holds a *run*: requests that share app, deadline and class (a job's requests), and so
every figure above. ``size[slot]`` is how many; ``count`` and ``len`` count requests. A slot per
request made every scan, write and release pay per request for what is the same for a whole job:
live, ORLOJ's insertion and expiry were its largest costs in a planner that had fallen behind.
A batch that needs only part of a run takes the run's first requests and leaves the rest in the
slot (``take``).

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
        self.size = np.zeros(capacity, dtype=np.int64)  # requests in the slot's run
        self.items: list[Any] = [None] * capacity  # the run: a list of requests
        self.count = np.zeros(n_sizes, dtype=np.int64)  # requests whose largest size is index i
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
        self.size = more(self.size, 0, 0)
        self.items.extend([None] * old)
        self._free.extend(range(2 * old - 1, old - 1, -1))

    def alloc(self, size: int = 1) -> int:
        """A slot for a run of ``size`` requests (stored by the caller in ``items``)."""
        if not self._free:
            self._grow()
        slot = self._free.pop()
        self.size[slot] = size
        if slot >= self.high:
            self.high = slot + 1
        return slot

    def alloc_many(self, n: int, sizes: np.ndarray | int = 1) -> tuple[slice | np.ndarray, Sequence[int]]:
        """Slots for ``n`` runs of ``sizes`` requests, in their order: as an index (a slice when
        they are one ascending run, the free list's usual answer, else an index array) and as a
        sequence of ints."""
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
        self.size[index] = sizes
        return index, slots

    def enter(self, slot: int, top: int) -> None:
        """The run in ``slot`` now belongs to the queues of sizes ``0..top`` (indices)."""
        old, n = int(self.top[slot]), int(self.size[slot])
        if old >= 0:
            self.count[old] -= n
            self.members_total -= n
            if top < old:
                self.beta[top + 1:old + 1, slot] = -np.inf
                self.next_ms[top + 1:old + 1, slot] = np.inf
        self.top[slot] = top
        if top >= 0:
            self.count[top] += n
            self.members_total += n

    def lower(self, slots: np.ndarray, tops: np.ndarray) -> None:
        """``enter`` for many slots at once, each to a smaller (or no) largest size."""
        old, n = self.top[slots], self.size[slots]
        self.count -= np.bincount(old, weights=n, minlength=self.n).astype(np.int64)
        keep = tops >= 0
        self.count += np.bincount(tops[keep], weights=n[keep], minlength=self.n).astype(np.int64)
        self.members_total -= int(n[~keep].sum())
        rows = np.arange(self.n)[:, None]
        out = (rows > tops[None, :]) & (rows <= old[None, :])
        beta, nxt = self.beta[:, slots], self.next_ms[:, slots]
        beta[out], nxt[out] = -np.inf, np.inf
        self.beta[:, slots], self.next_ms[:, slots] = beta, nxt
        self.top[slots] = tops

    def release(self, slot: int) -> Any:
        """The run leaves every queue; returns what was stored with it."""
        old, n = int(self.top[slot]), int(self.size[slot])
        if old >= 0:
            self.count[old] -= n
            self.members_total -= n
        self.beta[:, slot] = -np.inf
        self.next_ms[:, slot] = np.inf
        self.top[slot] = -1
        self.deadline[slot] = self.drop_at[slot] = np.inf
        self.size[slot] = 0
        item, self.items[slot] = self.items[slot], None
        self._free.append(slot)
        return item

    def release_many(self, slots: np.ndarray) -> list[Any]:
        """``release`` for many slots at once: their runs' requests, one list, run after run."""
        if not slots.size:
            return []
        # The counts in Python: a batch releases a few runs, where bincount, a sum and their
        # masks were a third of this call (``np.subtract.at`` cost more still).
        count, left = self.count, 0
        for old, n in zip(self.top[slots].tolist(), self.size[slots].tolist()):
            if old >= 0:
                count[old] -= n
                left += n
        self.members_total -= left
        self.beta[:, slots] = -np.inf
        self.next_ms[:, slots] = np.inf
        self.top[slots] = -1
        self.size[slots] = 0
        self.deadline[slots] = self.drop_at[slots] = np.inf
        idx = slots.tolist()
        items = self.items
        out = [p for i in idx for p in items[i]]
        for i in idx:
            items[i] = None
        self._free.extend(idx)
        return out

    def take(self, slots: np.ndarray, k: int) -> tuple[list[Any], int]:
        """The first ``k`` requests of ``slots``' runs, in order, and how many slots they came
        from: the runs wholly taken leave, and a last run that holds more than is needed keeps
        its remaining requests in its slot."""
        whole, total = 0, 0  # runs that fit whole (a cumsum and a search cost more for a few runs)
        for n in self.size[slots].tolist():
            if total + n > k:
                break
            total += n
            whole += 1
        out = self.release_many(slots[:whole])
        short = k - len(out)
        if short <= 0 or whole >= slots.size:
            return out, whole
        slot = int(slots[whole])  # a member of the queue: its top is at least the batch's size
        run = self.items[slot]
        out.extend(run[:short])
        self.items[slot] = run[short:]
        self.size[slot] -= short
        self.count[self.top[slot]] -= short
        self.members_total -= short
        return out, whole + 1

    def members(self, i: int) -> int:
        """``|Q|`` of size index ``i``, in requests."""
        return int(self.count[i:].sum())

    def best(self, i: int, k: int, x: float) -> list[int]:
        """Slots of the ``k`` best scores at ``X = x`` in size index ``i``'s queue, best first
        (a slot holds at least one request: ``k`` slots hold at least ``k`` requests).

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
