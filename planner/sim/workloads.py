"""Execution-time workloads for the simulator: the paper's synthetic cases and measured histograms.

A request's execution time ``l`` is drawn from a normal mixture of 1 to 8 peaks (ORLOJ Sec. 5.3)
or from a measured histogram (``broker.profiles.ExecHistogram``). A batch runs for
``c0 + c1 * k * max(l)`` (the model of ORLOJ Eq. 3-4: requests padded to the longest), so a
request alone takes ``c0 + c1 * l``; the SLO multiples of the paper refer to the P99 of that
alone time ("the P99 of minimum execution time", Sec. 5.7).

``std-1`` (Table 2) and ``two-modal`` (Table 3) are one distribution: Sec. 5.3 says the cases of
Fig. 10 (std 0.5 and 2, Table 2's ``std-0.5`` and ``std-2``) "extend on Figure 8b", the bimodal
case of Fig. 8 (Table 3's ``two-modal``), "generated with sigma = 1". The paper's two rows differ
by at most 0.05, as two runs of one workload do; here too they are two runs (the simulator draws
each case's execution times separately).

The paper gives the shapes (number of peaks, each peak's standard deviation) but not the
positions; here peaks are spread evenly over 40-100 ms (one peak: 70 ms), each application
sending one peak's requests (the paper adds peaks "to simulate the effect of multiple
applications"), and std is in units of 10 ms. The batch constants (``c0`` 50 ms, ``c1`` 0.25)
describe a GPU on which 16 identical 70 ms requests take 330 ms together against 67.5 ms alone:
batching triples throughput, and padding to the longest request is what makes variance costly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from adaserve.broker.errors import DataError, InvalidArgument
from adaserve.broker.profiles import ExecHistogram

__all__ = ["PAPER_WORKLOADS", "Workload", "from_histogram", "paper_workload"]

UNIT_MS = 10.0
FLOOR_MS = 2.0


@dataclass(frozen=True)
class Workload:
    """Where each request's execution time comes from, and the batch latency model's constants."""

    name: str
    peaks_ms: tuple[float, ...] = (70.0,)
    std_ms: float = 10.0
    weights: tuple[float, ...] | None = None
    edges_ms: tuple[float, ...] | None = None  # a measured histogram instead of peaks
    counts: tuple[float, ...] | None = None
    c0_ms: float = 50.0
    c1: float = 0.25
    apps: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.c0_ms < 0 or self.c1 <= 0 or self.std_ms < 0:
            raise ValueError("c0 >= 0, c1 > 0 and std >= 0 are required")
        if self.edges_ms is None and not self.peaks_ms:
            raise ValueError("a workload needs peaks or a histogram")
        if self.weights is not None and len(self.weights) != len(self.peaks_ms):
            raise ValueError("one weight per peak")

    @property
    def app_names(self) -> tuple[str, ...]:
        if self.apps:
            return self.apps
        n = 1 if self.edges_ms is not None else len(self.peaks_ms)
        return tuple(f"app{i}" for i in range(n))

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``n`` execution times (seconds) and the index of the app each request comes from."""
        if self.edges_ms is not None:
            edges, counts = np.asarray(self.edges_ms), np.asarray(self.counts, dtype=np.float64)
            b = rng.choice(counts.size, size=n, p=counts / counts.sum())
            ms = edges[b] + rng.random(n) * np.diff(edges)[b]
            return ms / 1e3, np.zeros(n, dtype=np.int64)
        k = len(self.peaks_ms)
        w = np.asarray(self.weights if self.weights is not None else [1.0] * k, dtype=np.float64)
        which = rng.choice(k, size=n, p=w / w.sum())
        ms = np.asarray(self.peaks_ms)[which] + self.std_ms * rng.standard_normal(n)
        return np.maximum(ms, FLOOR_MS) / 1e3, which.astype(np.int64)

    def batch_s(self, size: int, longest_s: float) -> float:
        return self.c0_ms / 1e3 + self.c1 * size * longest_s

    def alone_p99_s(self, n: int = 200_000) -> float:
        """P99 of a request's time alone (fixed seed: a property of the workload, not of a run)."""
        exec_s, _ = self.sample(n, np.random.default_rng(12345))
        return float(np.quantile(self.c0_ms / 1e3 + self.c1 * exec_s, 0.99))


def _peaks(n: int) -> tuple[float, ...]:
    return (70.0,) if n == 1 else tuple(np.linspace(40.0, 100.0, n).round(3))


PAPER_WORKLOADS: dict[str, Workload] = {
    "std-0.5": Workload("std-0.5", _peaks(2), 0.5 * UNIT_MS),
    "std-1": Workload("std-1", _peaks(2), 1.0 * UNIT_MS),
    "std-2": Workload("std-2", _peaks(2), 2.0 * UNIT_MS),
    "one-modal": Workload("one-modal", _peaks(1), 1.0 * UNIT_MS),
    "two-modal": Workload("two-modal", _peaks(2), 1.0 * UNIT_MS),
    "three-modal": Workload("three-modal", _peaks(3), 1.0 * UNIT_MS),
    "four-modal": Workload("four-modal", _peaks(4), 1.0 * UNIT_MS),
    "eight-modal": Workload("eight-modal", _peaks(8), 1.0 * UNIT_MS),
    "static": Workload("static", _peaks(1), 0.0),
}


def paper_workload(name: str) -> Workload:
    try:
        return PAPER_WORKLOADS[name]
    except KeyError:
        raise InvalidArgument(f"unknown workload {name!r} (known: {', '.join(PAPER_WORKLOADS)})") from None


def from_histogram(hist: ExecHistogram, *, c0_ms: float = 50.0, c1: float = 0.25) -> Workload:
    """A workload drawing execution times from a profiled histogram."""
    if len(hist.edges_ms) != len(hist.counts) + 1 or sum(hist.counts) <= 0:
        raise DataError("the histogram needs one more edge than counts and a positive count")
    return Workload(f"{hist.variant}@{hist.device}", edges_ms=tuple(hist.edges_ms),
                    counts=tuple(float(c) for c in hist.counts), c0_ms=c0_ms, c1=c1)
