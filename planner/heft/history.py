"""Performance histories (StarPU's history-based models): measured execution times per
(model, part, device kind, batch size), seeded from offline profiles, updated from every finished
batch, and trusted only after enough measurements.

Pure bookkeeping, no clock and no I/O: the planner's follow loop feeds ``observe`` and HEFT reads
``predict``. A key's estimate is its running mean; a batch size never measured is interpolated
(linearly, in batch size) between the nearest sizes that were, so one profile row per size a
profiler ran covers the sizes in between.

A profile is taken on another host, or on this one at another load: its figures are right in
proportion to each other but not in scale. So a seed still unmeasured is read in the scale its
device kind shows live: times the median, over that kind's measured histories that began from a
seed, of measured mean / seed. Without it, a kind measured 2x slower than its profile says would
make every plan resting on seeds of that kind look 2x cheaper than the measured ones, and win.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Iterator
from dataclasses import dataclass, field

WHOLE = "whole"  # the part name of an unsplit run
# A first measurement this many times the offline figure is a cold run (a new onnxruntime session
# allocates and plans on its first call) and is left out, once: taken as the device's time, it
# would send the next batches elsewhere until enough measurements averaged it away.
COLD = 3.0
TRUST_AFTER = 10  # StarPU calibrates a history with 10 measurements per codelet and size (STARPU_CALIBRATE_MINIMUM)


@dataclass(frozen=True, slots=True)
class Key:
    """What a history is of: ``part`` is ``whole``, ``part1``, ``part2``; ``kind`` a device kind."""

    model: str
    part: str
    kind: str


@dataclass(slots=True)
class Stat:
    """Welford running mean and variance of one (key, batch size); ``seeded`` counts nothing."""

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0
    seeded: bool = False
    cold: bool = False  # a cold first run was left out
    prior: float = 0.0  # the offline figure this began from (0: none)

    def add(self, x: float) -> bool:
        """Take a measurement; False for a cold run (see ``COLD``), which is left out."""
        if self.seeded:  # the first measurement replaces the offline figure, unless it is a cold run
            if x > COLD * self.mean and not self.cold:
                self.cold = True
                return False
            self.n, self.mean, self.m2, self.seeded = 0, 0.0, 0.0, False
        self.n += 1
        d = x - self.mean
        self.mean += d / self.n
        self.m2 += d * (x - self.mean)
        return True

    @property
    def std(self) -> float:
        return math.sqrt(self.m2 / (self.n - 1)) if self.n > 1 else 0.0


@dataclass(frozen=True, slots=True)
class Estimate:
    seconds: float
    trusted: bool  # measured TRUST_AFTER times at this size (or at both sizes around it)
    measured: int  # measurements behind it (0: the offline seed or an interpolation of seeds)


@dataclass
class Histories:
    trust_after: int = TRUST_AFTER
    _by_key: dict[Key, dict[int, Stat]] = field(default_factory=dict)
    _scales: dict[str, float] = field(default_factory=dict)  # kind -> measured / seeded, the median of:
    _ratios: dict[str, dict[tuple[Key, int], float]] = field(default_factory=dict)  # per seeded (key, size)

    def seed(self, key: Key, size: int, seconds: float) -> None:
        """An offline figure; it holds until the first measurement and is never trusted."""
        if size < 1 or not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"bad seed {key} b={size}: {seconds}")
        stats = self._by_key.setdefault(key, {})
        if size not in stats or stats[size].seeded:
            stats[size] = Stat(0, seconds, 0.0, seeded=True, prior=seconds)

    def observe(self, key: Key, size: int, seconds: float) -> None:
        if size < 1 or not math.isfinite(seconds) or seconds < 0:
            return
        stat = self._by_key.setdefault(key, {}).setdefault(size, Stat())
        if stat.add(seconds) and stat.prior > 0:
            ratios = self._ratios.setdefault(key.kind, {})
            ratios[(key, size)] = stat.mean / stat.prior
            self._scales[key.kind] = statistics.median(ratios.values())

    def scale(self, kind: str) -> float:
        """What the seeds of ``kind`` are multiplied by: measured / seeded, 1 until measured."""
        return self._scales.get(kind, 1.0)

    def _mean(self, key: Key, s: Stat) -> float:
        return s.mean * self.scale(key.kind) if s.seeded else s.mean

    def known(self, key: Key) -> bool:
        return bool(self._by_key.get(key))

    def predict(self, key: Key, size: int) -> Estimate | None:
        """The expected seconds of a batch of ``size``; None when nothing is known of ``key``."""
        stats = self._by_key.get(key)
        if not stats:
            return None
        got = stats.get(size)
        if got is not None:
            return Estimate(self._mean(key, got), got.n >= self.trust_after, got.n)
        sizes = sorted(stats)
        i = bisect.bisect_left(sizes, size)
        if len(sizes) == 1:  # one size known: scale by size, less than proportionally never assumed
            only = stats[sizes[0]]
            return Estimate(self._mean(key, only) * size / sizes[0], False, only.n)
        lo, hi = (sizes[0], sizes[1]) if i == 0 else (sizes[-2], sizes[-1]) if i == len(sizes) else (sizes[i - 1], sizes[i])
        a, b = stats[lo], stats[hi]
        ya, yb = self._mean(key, a), self._mean(key, b)
        y = ya + (yb - ya) * (size - lo) / (hi - lo)
        n = min(a.n, b.n)
        return Estimate(max(y, 0.0), n >= self.trust_after and lo < size < hi, n)

    def linear(self, key: Key) -> tuple[float, float] | None:
        """``(c0, c1)`` of ``seconds = c0 + c1 * size`` by least squares over the sizes known,
        each weighted by its measurements (a seed counts once): the smooth batch-latency model
        the batch size for a rate is chosen from, where one noisy size must not swing the choice."""
        stats = self._by_key.get(key)
        if not stats:
            return None
        pts = [(float(b), self._mean(key, s), float(max(s.n, 1))) for b, s in stats.items()]
        w = sum(p[2] for p in pts)
        mx = sum(x * wt for x, _, wt in pts) / w
        my = sum(y * wt for _, y, wt in pts) / w
        sxx = sum(wt * (x - mx) ** 2 for x, _, wt in pts)
        if sxx <= 0:  # one size: proportional
            return 0.0, my / mx
        c1 = max(sum(wt * (x - mx) * (y - my) for x, y, wt in pts) / sxx, 1e-9)
        return max(my - c1 * mx, 0.0), c1

    def rows(self) -> Iterator[tuple[Key, int, Stat]]:
        for key in sorted(self._by_key, key=lambda k: (k.model, k.part, k.kind)):
            for size in sorted(self._by_key[key]):
                yield key, size, self._by_key[key][size]

    def snapshot(self) -> list[dict[str, object]]:
        """Every (key, size) as plain data: for telemetry and the CLI."""
        return [{"model": k.model, "part": k.part, "kind": k.kind, "batch": b, "mean_ms": self._mean(k, s) * 1000.0,
                 "std_ms": s.std * 1000.0, "n": s.n, "seeded": s.seeded, "trusted": s.n >= self.trust_after}
                for k, b, s in self.rows()]


@dataclass
class Transfer:
    """Handing a tensor from one pool to the next through Redis: ``fixed + per_byte * bytes``,
    fitted by least squares over the measurements (the prior until two distinct sizes were seen)."""

    fixed_s: float = 0.5e-3
    per_byte_s: float = 1e-9  # ~1 GB/s: encode, XADD, read and decode together
    _obs: list[tuple[float, float]] = field(default_factory=list)
    keep: int = 512

    def observe(self, nbytes: int, seconds: float) -> None:
        if nbytes < 0 or not math.isfinite(seconds) or seconds < 0:
            return
        self._obs.append((float(nbytes), seconds))
        if len(self._obs) > self.keep:
            del self._obs[: len(self._obs) - self.keep]
        xs = [x for x, _ in self._obs]
        if len(set(xs)) < 2:
            return
        n = len(xs)
        mx, my = sum(xs) / n, sum(y for _, y in self._obs) / n
        sxx = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - my) for x, y in self._obs) / sxx
        self.per_byte_s = max(slope, 0.0)
        self.fixed_s = max(my - self.per_byte_s * mx, 0.0)

    @property
    def measured(self) -> int:
        return len(self._obs)

    def predict(self, nbytes: int) -> float:
        return self.fixed_s + self.per_byte_s * nbytes
