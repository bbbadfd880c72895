"""Per-application empirical execution-time distributions (ORLOJ Sec. 3.2), windowed.

Samples are a request's execution time, tagged with the application that sent it. The memory is
a sliding window of the latest samples, and it is wiped every ``reset_s`` seconds so that a
drift in the inputs is followed (the paper's "resets its profiling memory every once a while").
The last snapshot is kept across a reset until enough new samples have come in, and a prior
(from the model's profile, or a cautious default) serves until the first real samples arrive.

A ``Snapshot`` puts every application on one grid of bins, which is what the order statistics
of mixed batches need; applications with too few samples of their own use the pooled histogram.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

__all__ = ["POOLED", "ExecDistributions", "Snapshot"]

POOLED = "*"


@dataclass(frozen=True)
class Snapshot:
    """Histograms of execution time (seconds) on one grid: ``masses[app]`` sums to 1."""

    edges: np.ndarray
    masses: dict[str, np.ndarray]
    version: int

    def mass_of(self, app: str) -> np.ndarray:
        return self.masses.get(app, self.masses[POOLED])

    @property
    def apps(self) -> list[str]:
        return list(self.masses)

    def mean(self, app: str = POOLED) -> float:
        mids = (self.edges[:-1] + self.edges[1:]) / 2.0
        return float(self.mass_of(app) @ mids)


def _grid(values: np.ndarray, nbins: int) -> np.ndarray:
    lo, hi = float(values.min()), float(values.max())
    pad = max(1e-6, 0.02 * (hi - lo), 0.005 * hi)  # a static model still gets a width to integrate
    return np.linspace(max(0.0, lo - pad), hi + pad, nbins + 1)


def _stratified(edges: np.ndarray, counts: np.ndarray, total: int) -> np.ndarray:
    """Deterministic pseudo-samples spread evenly inside each bin, about ``total`` of them."""
    counts = np.asarray(counts, dtype=np.float64)
    if counts.sum() <= 0:
        raise ValueError("a prior histogram needs a positive count")
    per_bin = np.maximum(np.round(counts / counts.sum() * total), (counts > 0).astype(float)).astype(int)
    out = [lo + (np.arange(n) + 0.5) / n * (hi - lo) for lo, hi, n in zip(edges[:-1], edges[1:], per_bin) if n]
    return np.concatenate(out)


class ExecDistributions:
    """Windowed per-app samples of execution time and the snapshot built from them."""

    def __init__(self, *, window: int = 2000, reset_s: float = 600.0, nbins: int = 32,
                 min_samples: int = 30, prior_samples: np.ndarray | None = None) -> None:
        if window < 10 or nbins < 2 or min_samples < 1 or not reset_s > 0:
            raise ValueError("window >= 10, nbins >= 2, min_samples >= 1 and reset_s > 0 are required")
        self.window, self.reset_s, self.nbins, self.min_samples = window, reset_s, nbins, min_samples
        self._samples: deque[tuple[str, float]] = deque(maxlen=window)
        self._prior = np.asarray(prior_samples if prior_samples is not None else [0.008, 0.010, 0.012], dtype=np.float64)
        if self._prior.size == 0 or np.any(self._prior <= 0) or not np.all(np.isfinite(self._prior)):
            raise ValueError("prior samples must be positive execution times in seconds")
        self._epoch: float | None = None
        self._since_build = 0
        self._version = 0
        self._snapshot = self._build_from(np.empty(0), [])

    @classmethod
    def from_histogram(cls, edges_s: np.ndarray, counts: np.ndarray, **kw: float | int) -> ExecDistributions:
        """Start from a profiled histogram (``broker.profiles.ExecHistogram``, converted to seconds)."""
        return cls(prior_samples=_stratified(np.asarray(edges_s, dtype=np.float64), np.asarray(counts), 500), **kw)  # type: ignore[arg-type]

    # -- feeding ---------------------------------------------------------------------------------
    def add(self, app: str, seconds: float, now: float) -> None:
        self.add_many(((app, seconds),), now)

    def add_many(self, samples: Iterable[tuple[str, float]], now: float) -> None:
        """``add`` for a finished batch's requests at once (the planner feeds every batch's, and
        a numpy finiteness check per request was most of ORLOJ's ``observe``): NaN, infinite and
        non-positive times are left out."""
        kept = [(app, float(s)) for app, s in samples if 0.0 < s < math.inf]
        if not kept:
            return
        self._maybe_reset(now)
        self._samples.extend(kept)
        self._since_build += len(kept)

    def _maybe_reset(self, now: float) -> None:
        if self._epoch is None:
            self._epoch = now
        elif now - self._epoch >= self.reset_s:
            self._epoch = now
            self._samples.clear()  # the current snapshot stays until the new window can replace it

    @property
    def pending_samples(self) -> int:
        """Samples added since the last snapshot was built."""
        return self._since_build

    def __len__(self) -> int:
        return len(self._samples)

    # -- snapshots -------------------------------------------------------------------------------
    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    def rebuild(self) -> Snapshot:
        """A new snapshot from the window (the previous one when the window is still too thin)."""
        self._since_build = 0
        if len(self._samples) < self.min_samples:
            return self._snapshot
        apps = [a for a, _ in self._samples]
        values = np.fromiter((v for _, v in self._samples), dtype=np.float64, count=len(self._samples))
        self._snapshot = self._build_from(values, apps)
        return self._snapshot

    def _build_from(self, values: np.ndarray, apps: list[str]) -> Snapshot:
        pooled = values if values.size else self._prior
        edges = _grid(pooled, self.nbins)
        masses = {POOLED: self._mass(pooled, edges)}
        if values.size:
            tags = np.asarray(apps)
            for app in sorted(set(apps)):
                own = values[tags == app]
                if own.size >= self.min_samples:
                    masses[app] = self._mass(own, edges)
        self._version += 1
        return Snapshot(edges, masses, self._version)

    @staticmethod
    def _mass(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
        counts, _ = np.histogram(np.clip(values, edges[0], edges[-1]), bins=edges)
        mass: np.ndarray = counts.astype(np.float64) / max(counts.sum(), 1)
        return mass
