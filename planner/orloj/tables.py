"""Per (application, batch size) latency estimates and score segments, built off the critical path.

ORLOJ cannot know a batch's members when it scores a request (the batch is formed *from* the
scores), so it assumes the other members come from all the model's distributions (Sec. 4.3).
Here a request of app ``a`` in a batch of ``k`` shares it with ``k - 1`` draws from the pooled
histogram of every app: its batch's maximum has CDF ``F_a * F_pool^(k-1)`` (Eq. 7-9), which gives
both ``E[L_B]`` (the feasibility test of Algorithm 1) and the histogram of ``L_B`` that Eq. (2)
sums over. Everything depends only on (app, k), so it is computed once per snapshot.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from functools import partial

import numpy as np

from adaserve.planner.orloj.distributions import POOLED, Snapshot
from adaserve.planner.orloj.order_stats import Mixture, expected_max_mixed
from adaserve.planner.orloj.score import ScoreSegments, score_segments

__all__ = ["BatchTables", "TableEntry"]


class TableEntry:
    """``E[L_B]``, the expected latency of a batch of k holding the request, and the score's
    segments, made the first time they are read: a rebuild holds the planner's loop, the segments
    were two thirds of it, and live most sizes are not ranked before the next rebuild."""

    __slots__ = ("_make", "_segments", "est_s")

    def __init__(self, est_s: float, make: Callable[[], ScoreSegments]) -> None:
        self.est_s = est_s
        self._make: Callable[[], ScoreSegments] | None = make
        self._segments: ScoreSegments | None = None

    @property
    def segments(self) -> ScoreSegments:
        if self._segments is None:
            assert self._make is not None
            self._segments, self._make = self._make(), None
        return self._segments


def _coarsen(edges: np.ndarray, mass: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Merge neighbouring bins into at most ``bins`` of about equal mass.

    Every bin edge is a milestone of every request, so the score's histogram is kept short;
    equal-mass groups keep the resolution where the probability is.
    """
    if mass.size <= bins:
        return edges, mass
    cum = np.cumsum(mass) / mass.sum()
    cuts = np.unique(np.searchsorted(cum, np.arange(1, bins) / bins, side="left") + 1)
    cuts = cuts[(cuts > 0) & (cuts < mass.size)]
    idx = np.concatenate([[0], cuts, [mass.size]])
    return edges[idx], np.add.reduceat(mass, idx[:-1])


class BatchTables:
    def __init__(self, snapshot: Snapshot, c0: float, c1: float, sizes: Sequence[int], b: float,
                 score_bins: int = 12, margins: Sequence[float] = ()) -> None:
        self.snapshot, self.c0, self.c1, self.b, self.score_bins = snapshot, c0, c1, b, score_bins
        self.sizes = tuple(sizes)
        # per size, seconds added to the line (``BatchLatencyFit.margin``): what it misses that size by
        if margins and len(margins) != len(self.sizes):
            raise ValueError("margins must give one figure per size")
        self.margins = dict(zip(self.sizes, margins))
        self._entries: dict[tuple[str, int], TableEntry] = {}
        self._emax: dict[tuple[tuple[str, int], ...], float] = {}
        self._rows: dict[str, tuple[tuple[TableEntry, ...], tuple[float, ...]]] = {}

    def _app_entries(self, app: str) -> None:
        """Every size's entry of ``app`` (a key of the snapshot), made the first time it is asked for.

        A rebuild holds the planner's loop, and it used to make every app's row and the pool's:
        with one app (the usual deployment) the pool's row was never read, and half of the
        rebuild's ~7 ms was for it."""
        if (app, self.sizes[0]) in self._entries:
            return
        pool = self.snapshot.masses[POOLED]
        mix = Mixture(self.snapshot.edges, [self.snapshot.masses[app], pool])
        for k in self.sizes:
            self._entries[(app, k)] = self._entry(mix, k)

    def _entry(self, mix: Mixture, k: int) -> TableEntry:
        emax = mix.expected_max([1, k - 1])
        fixed = self.c0 + self.margins.get(k, 0.0)  # the whole distribution moves with the margin
        mean = fixed + self.c1 * k * emax
        return TableEntry(mean, partial(self._segments, mix, k, fixed, mean))

    def _segments(self, mix: Mixture, k: int, fixed: float, mean: float) -> ScoreSegments:
        mass = mix.max_masses([1, k - 1])
        lat_edges = fixed + self.c1 * k * self.snapshot.edges
        nz = np.flatnonzero(mass > 1e-12)
        lo, hi = int(nz[0]), int(nz[-1]) + 1
        e, m = _coarsen(lat_edges[lo:hi + 1], mass[lo:hi], self.score_bins)
        return score_segments(e, m, mean, self.b)

    def row(self, app: str) -> tuple[tuple[TableEntry, ...], tuple[float, ...]]:
        """The entries of ``app`` (or of the pool) for every size, in the order of ``sizes``,
        and their ``E[L_B]``, made non-decreasing (a larger batch never waits less)."""
        key = self.known(app)
        got = self._rows.get(key)
        if got is None:
            self._app_entries(key)
            entries = tuple(self._entries[(key, k)] for k in self.sizes)
            ests = tuple(np.maximum.accumulate([e.est_s for e in entries]).tolist())
            got = self._rows[key] = (entries, ests)
        return got

    def entry(self, app: str, k: int) -> TableEntry:
        key = self.known(app)
        self._app_entries(key)
        return self._entries[(key, k)]

    def known(self, app: str) -> str:
        """The key the tables use for ``app`` (its own, or the pooled histogram)."""
        return app if app in self.snapshot.masses else POOLED

    def predict(self, apps: Iterable[str]) -> float:
        """``E[L_B]`` of a batch whose members' apps are known (Eq. 7-9 on the actual mix)."""
        keys = [self.known(a) for a in apps]
        if not keys:
            return 0.0
        return self.c0 + self.margins.get(len(keys), 0.0) + self.c1 * len(keys) * self._exact(_tally(keys))

    def _exact(self, tally: tuple[tuple[str, int], ...]) -> float:
        got = self._emax.get(tally)
        if got is None:
            masses = [self.snapshot.masses[a] for a, _ in tally]
            got = expected_max_mixed(self.snapshot.edges, masses, [n for _, n in tally])
            self._emax[tally] = got
        return got

    def expected_max(self, apps: Sequence[str]) -> float:
        """``E[max]`` over a batch of these apps' requests (memoised per composition)."""
        if apps and apps.count(apps[0]) == len(apps):  # one app, the usual batch: no tally to sort
            return self._exact(((self.known(apps[0]), len(apps)),))
        return self._exact(_tally(self.known(a) for a in apps))


def _tally(keys: Iterable[str]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(Counter(keys).items()))
