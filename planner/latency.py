"""Batch latency models fitted online from finished batches.

``Rls`` is recursive least squares of ``y = c0 + c1 * x`` with exponential forgetting: each
finished batch updates the fit in O(1), old observations fade so drift is followed, and a prior
holds until feedback arrives. ``LinearLatency`` (``x`` = batch size) serves the foundation's EDF
policy; ORLOJ's ``BatchLatencyFit`` uses the same estimator with ``x = k * E[max]``.
"""

from __future__ import annotations

import numpy as np


class Rls:
    """Two-coefficient recursive least squares with forgetting factor ``forget``."""

    def __init__(self, c0: float, c1: float, covariance: np.ndarray, *, forget: float) -> None:
        if not 0.5 < forget <= 1.0:
            raise ValueError("forget must be in (0.5, 1]")
        self.theta = np.array([c0, c1], dtype=np.float64)
        self._p = covariance
        self._forget = forget
        self.observations = 0

    def update(self, x: float, y: float) -> None:
        v = np.array([1.0, x])
        pv = self._p @ v
        gain = pv / (self._forget + v @ pv)
        self.theta = self.theta + gain * (y - v @ self.theta)
        self._p = (self._p - np.outer(gain, pv)) / self._forget
        self.observations += 1


class RlsCoefficients:
    """The fitted ``c0`` and ``c1`` of a subclass's ``_rls``, floored: noise early on can push
    the estimates below zero, and a latency is never negative nor free per unit of ``x``."""

    C1_FLOOR = 1e-6
    _rls: Rls

    @property
    def observations(self) -> int:
        return self._rls.observations

    @property
    def c0(self) -> float:
        return float(max(self._rls.theta[0], 0.0))

    @property
    def c1(self) -> float:
        return float(max(self._rls.theta[1], self.C1_FLOOR))


class LinearLatency(RlsCoefficients):
    """``l(k) = c0 + c1 * k`` seconds for a batch of ``k``."""

    def __init__(self, c0: float = 0.005, c1: float = 0.002, *, forget: float = 0.995, prior_weight: float = 4.0) -> None:
        if c0 < 0 or c1 < 0:
            raise ValueError("latency coefficients must be non-negative")
        self._rls = Rls(c0, c1, np.eye(2) / prior_weight, forget=forget)

    def predict(self, size: int) -> float:
        """Seconds a batch of ``size`` is expected to take."""
        return self.c0 + self.c1 * size

    def update(self, size: int, seconds: float) -> None:
        if size <= 0 or not np.isfinite(seconds) or seconds < 0:
            return
        self._rls.update(float(size), seconds)

    def largest_within(self, budget_s: float, max_size: int) -> int:
        """The largest batch size whose predicted latency fits ``budget_s`` (0 when none)."""
        if budget_s < self.predict(1):
            return 0
        k = int((budget_s - self.c0) / self.c1) if self.c1 > 0 else max_size
        return max(1, min(k, max_size))
