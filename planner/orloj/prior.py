"""What a model's profile tells a policy before any feedback: execution times and batch latency.

From ``broker.profiles.Profile``: the execution-time histogram of the chosen variant and device
(``exec_hist``), and the batch latencies per size (``latency``). Both are optional; what is
missing falls back to a cautious default (about 10 ms a request, the foundation's latency line),
which the policies then correct from feedback.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from adaserve.broker.errors import DataError
from adaserve.broker.profiles import ExecHistogram, LatencyPoint, Profile
from adaserve.planner.orloj.order_stats import expected_max_identical

__all__ = ["Prior", "prior_from_profile"]


@dataclass(frozen=True)
class Prior:
    """Execution-time histogram (seconds) and the two latency models policies start from."""

    edges_s: np.ndarray
    counts: np.ndarray
    c0: float  # l_B = c0 + c1 * k * E[max]  (ORLOJ)
    c1: float
    line_c0: float  # l(k) = line_c0 + line_c1 * k  (point-estimate baselines)
    line_c1: float

    @property
    def mean_s(self) -> float:
        mids = (self.edges_s[:-1] + self.edges_s[1:]) / 2.0
        return float(self.counts @ mids / self.counts.sum())


DEFAULT = Prior(np.array([0.008, 0.012]), np.array([1.0]), 0.005, 0.2, 0.005, 0.002)


_Point = TypeVar("_Point", ExecHistogram, LatencyPoint)


def _pick(items: list[_Point], variant: str | None, device: str | None) -> list[_Point]:
    chosen = [i for i in items if (variant is None or i.variant == variant) and (device is None or i.device == device)]
    if chosen or variant is None:
        return chosen
    return [i for i in items if device is None or i.device == device]


def _lstsq(x: np.ndarray, y: np.ndarray, fallback: tuple[float, float]) -> tuple[float, float]:
    if x.size < 2 or np.ptp(x) <= 0:
        if x.size == 1 and x[0] > 0:
            return 0.0, float(y[0] / x[0])
        return fallback
    slope, icpt = np.polyfit(x, y, 1)
    if slope <= 0:
        return fallback
    return float(max(icpt, 0.0)), float(slope)


def prior_from_profile(profile: Profile | None, *, variant: str | None = None, device: str | None = None) -> Prior:
    """The prior of ``profile`` for one variant/device (the first one found when not given)."""
    if profile is None:
        return DEFAULT
    hists = _pick(list(profile.exec_hist), variant, device)
    points = _pick(list(profile.latency), variant, device)
    if points:  # one variant/device's points only, so the line is one model's
        points = [p for p in points if (p.variant, p.device) == (points[0].variant, points[0].device)]
    sizes = np.array([p.batch_size for p in points], dtype=np.float64)
    lat = np.array([p.mean_ms for p in points], dtype=np.float64) / 1e3
    if hists:
        h = hists[0]
        edges, counts = np.asarray(h.edges_ms, dtype=np.float64) / 1e3, np.asarray(h.counts, dtype=np.float64)
        if edges.size != counts.size + 1 or counts.sum() <= 0 or np.any(np.diff(edges) <= 0):
            raise DataError(f"profile {profile.model!r} has a malformed execution-time histogram")
    elif points:
        alone = float(lat[np.argmin(sizes)])
        edges, counts = np.array([alone * 0.99, alone * 1.01]), np.array([1.0])
    else:
        return DEFAULT
    line = _lstsq(sizes, lat, (DEFAULT.line_c0, DEFAULT.line_c1))
    mass = counts / counts.sum()
    x = np.array([k * expected_max_identical(edges, mass, int(k)) for k in sizes])
    mean = float(mass @ ((edges[:-1] + edges[1:]) / 2))
    c0, c1 = _lstsq(x, lat, (0.0, 1.0)) if points else (0.0, 1.0)
    if not points:
        line = (0.0, mean)
    return Prior(edges, counts, c0, c1, line[0], line[1])
