"""Batch latency ``l(k) = c0 + c1 * k``, fitted online from finished batches.

Recursive least squares with exponential forgetting: each finished batch updates (c0, c1) in
O(1), old observations fade so drift is followed, and a prior (from the profile, or a cautious
default) holds until feedback arrives.
"""

from __future__ import annotations

import numpy as np


class LinearLatency:
    def __init__(self, c0: float = 0.005, c1: float = 0.002, *, forget: float = 0.995, prior_weight: float = 4.0) -> None:
        if c0 < 0 or c1 < 0:
            raise ValueError("latency coefficients must be non-negative")
        if not 0.5 < forget <= 1.0:
            raise ValueError("forget must be in (0.5, 1]")
        self._theta = np.array([c0, c1], dtype=float)
        self._p = np.eye(2) / prior_weight
        self._forget = forget
        self.observations = 0

    @property
    def c0(self) -> float:
        return float(max(self._theta[0], 0.0))

    @property
    def c1(self) -> float:
        return float(max(self._theta[1], 1e-6))

    def predict(self, size: int) -> float:
        """Seconds a batch of ``size`` is expected to take."""
        return self.c0 + self.c1 * size

    def update(self, size: int, seconds: float) -> None:
        if size <= 0 or not np.isfinite(seconds) or seconds < 0:
            return
        x = np.array([1.0, float(size)])
        px = self._p @ x
        gain = px / (self._forget + x @ px)
        self._theta = self._theta + gain * (seconds - x @ self._theta)
        self._p = (self._p - np.outer(gain, px)) / self._forget
        self.observations += 1

    def largest_within(self, budget_s: float, max_size: int) -> int:
        """The largest batch size whose predicted latency fits ``budget_s`` (0 when none)."""
        if budget_s < self.predict(1):
            return 0
        k = int((budget_s - self.c0) / self.c1) if self.c1 > 0 else max_size
        return max(1, min(k, max_size))
