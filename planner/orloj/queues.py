"""Algorithm 1's per-batch-size queues ``Q_bs``, stored once for all sizes.

A request's expected batch latency grows with the batch size, so the sizes it can still make
are always ``1..K`` for some largest size ``K``, which only shrinks as its deadline nears. The
queues are therefore nested: a request is filed once, under the index ``top`` of its ``K``
(``Q_bs`` = the requests filed under ``index(bs)`` or above), and leaving a size is moving it
down, leaving all of them is removing it.

What is filed is a *run* (``Run``): requests that share app, deadline and class (a job's
requests), and so every figure below. ``n`` is how many; ``count`` and ``len`` count requests.
A batch that needs only part of a run takes the run's first requests and leaves the rest filed
(``take``).

Everything is plain Python objects, lists and dicts. The arrays this replaced cost a numpy call
(a microsecond or more) per figure per step, on queues of a few dozen runs: live, ORLOJ's calls
then cost its planner three times EDF's CPU, which at saturation was the finish rate it lost
(docs/orloj.md, "Sixteenth session"). When a run must leave its largest size is one time,
``drop_at``, kept in a heap: finding what is due is a look at its head.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from adaserve.planner.orloj.mirror import ScoreMirror

__all__ = ["Group", "Run", "SizeQueues"]


# One app's figures in one generation of tables: its ``TableEntry`` per size (whose score segments
# are made the first time they are read) and ``E[L_B]`` per size (non-decreasing).
Group = tuple[Sequence[Any], tuple[float, ...]]


class Run:
    """Requests that share app, deadline and class, filed together."""

    __slots__ = ("coef", "cost", "deadline", "decay", "drop_at", "entries", "ests", "items", "key", "n", "slot", "top")

    def __init__(self, items: list[Any], key: int, group: Group, deadline: float, cost: float, decay: float,
                 top: int) -> None:
        self.items, self.n, self.key = items, len(items), key
        self.entries, self.ests = group
        self.deadline, self.cost, self.decay = deadline, cost, decay
        self.top = top  # -1: filed nowhere
        self.drop_at = deadline - self.ests[top]  # when the deadline no longer allows size ``top``
        # Per size index, the score's coefficients and next milestone, ``[alpha, beta, next_ms]``
        # (score ``alpha * X + beta``); None until first read (a size's queue is ranked rarely,
        # and most runs leave before theirs is).
        self.coef: list[list[float] | None] = [None] * len(self.ests)
        self.slot = -1  # its slot in the queues' ``ScoreMirror`` while they keep one


class SizeQueues:
    # Filed runs past which the queues keep a ``ScoreMirror`` (ranking by arrays), and below
    # which they drop it: Python ranks a few dozen runs cheaper, numpy thousands.
    ATTACH = 128
    DETACH = 32

    def __init__(self, n_sizes: int) -> None:
        self.n = n_sizes
        self.mirror: ScoreMirror | None = None
        self.filed: list[dict[int, Run]] = [{} for _ in range(n_sizes)]  # by top, in the order filed
        self.count = [0] * n_sizes  # requests whose largest size is index i
        self.members_total = 0  # ``sum(count)``: the planner asks the length several times a step
        self._drops: list[tuple[float, int, Run]] = []  # (drop_at, key, run); stale entries skipped
        self._compact_at = 256  # heap length that triggers dropping its stale entries

    def add(self, run: Run) -> None:
        top = run.top
        self.filed[top][run.key] = run
        self.count[top] += run.n
        self.members_total += run.n
        self._push(run)
        if self.mirror is not None:
            self.mirror.file(run)

    def _push(self, run: Run) -> None:
        drops = self._drops
        heapq.heappush(drops, (run.drop_at, run.key, run))
        if len(drops) >= self._compact_at:
            # A run batched or lowered leaves its entry until its time comes, which with long
            # deadlines is seconds of entries behind a few live ones. Keep the live ones.
            live = [(r.drop_at, r.key, r) for r in self.runs()]
            heapq.heapify(live)
            self._drops = live
            self._compact_at = max(256, 2 * len(live))

    def lower(self, run: Run, top: int) -> None:
        """``run`` (filed) now belongs to the queues of sizes ``0..top`` only (``0 <= top``)."""
        old = run.top
        del self.filed[old][run.key]
        self.count[old] -= run.n
        self.filed[top][run.key] = run
        self.count[top] += run.n
        run.top = top
        run.drop_at = run.deadline - run.ests[top]
        self._push(run)
        if self.mirror is not None:
            self.mirror.moved(run)

    def release(self, run: Run) -> list[Any]:
        """``run`` leaves every queue; its requests (which it no longer holds)."""
        del self.filed[run.top][run.key]
        self.count[run.top] -= run.n
        self.members_total -= run.n
        run.top = -1
        if self.mirror is not None:
            self.mirror.left(run)
        items, run.items = run.items, []
        return items

    def next_drop(self) -> float:
        """No run is due to leave a size before this time (a bound: it may be a stale entry's)."""
        return self._drops[0][0] if self._drops else math.inf

    def due(self, now: float) -> Iterator[Run]:
        """The filed runs whose ``drop_at`` is before ``now``, earliest first, each out of the heap:
        the caller lowers or releases it."""
        while self._drops and self._drops[0][0] < now:  # not a local: lowering may compact it
            at, _, run = heapq.heappop(self._drops)
            if run.top >= 0 and run.drop_at == at:  # else released, or lowered since (pushed again)
                yield run

    def members(self, i: int) -> int:
        """``|Q|`` of size index ``i``, in requests."""
        return sum(self.count[i:])

    def queue(self, i: int) -> Iterator[Run]:
        """The runs of size index ``i``'s queue."""
        for t in range(i, self.n):
            yield from self.filed[t].values()

    def runs(self) -> Iterator[Run]:
        return self.queue(0)

    def release_queue(self, i: int) -> tuple[list[Any], list[Run]]:
        """Every run of size index ``i``'s queue leaves: their requests, and the runs."""
        out: list[Any] = []
        runs: list[Run] = []
        for t in range(i, self.n):
            filed = self.filed[t]
            if not filed:
                continue
            got = list(filed.values())
            filed.clear()
            left = 0
            for run in got:
                run.top = -1
                out += run.items
                run.items = []  # its heap entry outlives it: the requests must not
                left += run.n
            self.count[t] -= left
            self.members_total -= left
            runs += got
        if self.mirror is not None:
            for run in runs:
                self.mirror.left(run)
        return out, runs

    def take(self, order: Iterable[Run], k: int) -> tuple[list[Any], int]:
        """The first ``k`` requests of ``order``'s runs, in order, and how many runs they came
        from: the runs wholly taken leave, and a last run that holds more than is needed keeps
        its remaining requests filed."""
        out: list[Any] = []
        used = 0
        for run in order:
            short = k - len(out)
            if short <= 0:
                break
            used += 1
            if run.n <= short:
                out += self.release(run)
                continue
            out += run.items[:short]
            run.items = run.items[short:]
            run.n -= short
            self.count[run.top] -= short
            self.members_total -= short
            break
        return out, used

    def mirrored(self) -> ScoreMirror | None:
        """The queues' ``ScoreMirror``, kept while more than ``ATTACH`` runs are filed and
        dropped below ``DETACH``; None while ranking in Python is the cheaper."""
        runs = sum(map(len, self.filed))
        if self.mirror is None and runs > self.ATTACH:
            self.mirror = ScoreMirror(self.n, self.runs())
        elif self.mirror is not None and runs < self.DETACH:
            self.mirror.detach()
            self.mirror = None
        return self.mirror

    def rebase(self, factor: float) -> None:
        """Every filed run's decay and cached ``alpha`` times ``factor``."""
        if self.mirror is not None:
            self.mirror.rebase(factor)
        for run in self.runs():
            run.decay *= factor
            for c in run.coef:
                if c is not None:
                    c[0] *= factor

    def __len__(self) -> int:
        return self.members_total
