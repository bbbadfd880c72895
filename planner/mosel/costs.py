"""Per-subset batch latencies and accuracies, and the latency of running k requests of a subset.

A job's requests that share a modality subset run as batches of that subset's variant. With a
largest profiled batch ``B``, k requests may need several batches; the cheapest split of k into
batches of at most ``B`` is a small unbounded-knapsack recursion over the profiled batch
latencies, so a profile that is not monotone in batch size (measurement noise) is handled exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from adaserve.broker.errors import InvalidMessage
from adaserve.broker.profiles import Profile

from .strategy import Strategy


def _fill_batches(sizes: list[int], values: list[float], max_batch: int) -> list[float]:
    """Latency for every batch size 1..max_batch, linear between profiled sizes (flat outside)."""
    order = np.argsort(sizes)
    xs = np.asarray(sizes, dtype=float)[order]
    ys = np.asarray(values, dtype=float)[order]
    return [float(v) for v in np.interp(np.arange(1, max_batch + 1), xs, ys)]


@dataclass
class SubsetCosts:
    """The offline inputs of MOSEL for one model on one device.

    ``batch_ms[m][b-1]`` is the latency of one batch of ``b`` requests of subset ``m``.
    """

    subsets: tuple[str, ...]
    accuracy: tuple[float, ...]
    batch_ms: tuple[tuple[float, ...], ...]
    _memo: dict[tuple[int, int], float] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.subsets:
            raise ValueError("a model needs at least one modality subset")
        if len(set(self.subsets)) != len(self.subsets):
            raise ValueError(f"duplicate subset names in {self.subsets}")
        if not (len(self.subsets) == len(self.accuracy) == len(self.batch_ms)):
            raise ValueError("subsets, accuracy and batch_ms must have one entry per subset")
        lens = {len(row) for row in self.batch_ms}
        if len(lens) != 1 or 0 in lens:
            raise ValueError("every subset needs latencies for the same batch sizes 1..B")
        if any(not np.isfinite(v) or v < 0 for row in self.batch_ms for v in row):
            raise ValueError("batch latencies must be finite and non-negative")

    @property
    def max_batch(self) -> int:
        return len(self.batch_ms[0])

    @property
    def max_accuracy(self) -> float:
        return max(self.accuracy)

    @property
    def min_accuracy(self) -> float:
        return min(self.accuracy)

    @property
    def richest(self) -> int:
        """Index of the most accurate subset (the cheaper one on a tie)."""
        return min(range(len(self.subsets)), key=lambda m: (-self.accuracy[m], self.batch_ms[m][-1]))

    def run_ms(self, m: int, k: int) -> float:
        """Latency of k requests of subset m, split into the cheapest batches of at most B."""
        if k <= 0:
            return 0.0
        key = (m, k)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        row = self.batch_ms[m]
        # Iterative fill keeps the recursion shallow for large k.
        for j in range(1, k + 1):
            if (m, j) not in self._memo:
                self._memo[(m, j)] = min(row[b - 1] + (self._memo[(m, j - b)] if j > b else 0.0)
                                         for b in range(1, min(j, len(row)) + 1))
        return self._memo[key]

    def strategy(self, counts: tuple[int, ...]) -> Strategy:
        """The strategy with these counts, its latency and its effective accuracy."""
        if len(counts) != len(self.subsets) or any(k < 0 for k in counts) or sum(counts) == 0:
            raise ValueError(f"bad counts {counts} for subsets {self.subsets}")
        n = sum(counts)
        lat = sum(self.run_ms(m, k) for m, k in enumerate(counts)) / 1e3
        acc = sum(a * k for a, k in zip(self.accuracy, counts)) / n
        return Strategy(self.subsets, tuple(int(k) for k in counts), lat, acc)

    def scaled(self, factor: float) -> SubsetCosts:
        """The same costs with every latency times ``factor`` (profiling error, Sec. 7.4)."""
        if not factor > 0:
            raise ValueError("a latency scale factor must be positive")
        return SubsetCosts(self.subsets, self.accuracy,
                           tuple(tuple(v * factor for v in row) for row in self.batch_ms))

    @classmethod
    def from_profile(cls, profile: Profile, device: str = "cpu",
                     subsets: tuple[str, ...] | None = None) -> SubsetCosts:
        """Read the variants that have both an accuracy and latencies on ``device``.

        Variants are the modality subsets (``audio``, ``image``, ``audio+image``); batch sizes
        the profile skipped are filled in linearly, up to the largest one profiled.
        """
        acc = {q.variant: q.value for q in profile.quality if q.metric == "accuracy"}
        lat: dict[str, dict[int, float]] = {}
        for p in profile.latency:
            if p.device == device:
                lat.setdefault(p.variant, {})[p.batch_size] = p.p50_ms
        names = subsets or tuple(sorted(v for v in lat if v in acc))
        missing = [v for v in names if v not in acc or v not in lat]
        if missing or not names:
            raise InvalidMessage(
                "profile", f"profile of {profile.model!r} lacks accuracy or {device} latency for "
                f"{missing or 'every variant'}")
        max_batch = max(max(lat[v]) for v in names)
        rows = tuple(tuple(_fill_batches(list(lat[v]), list(lat[v].values()), max_batch))
                     for v in names)
        return cls(tuple(names), tuple(float(acc[v]) for v in names), rows)
