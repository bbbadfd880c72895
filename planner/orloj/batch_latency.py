"""Batch latency ``l_B = c0 + c1 * k * max`` (ORLOJ Eq. 3-5), with ``c0, c1`` fitted online.

Requests in a batch are padded to the longest one, so a batch of ``k`` costs like ``k`` copies of
its maximum. The regressor of a finished batch is ``k`` times its maximum execution time when the
per-request times are known (the profiler's measurements, or the simulator), else ``k`` times the
expected maximum under the current distributions. Recursive least squares with forgetting keeps
the fit current in O(1) per batch and holds the prior until feedback arrives.
"""

from __future__ import annotations

import numpy as np

from adaserve.planner.latency import Rls, RlsCoefficients

__all__ = ["BatchLatencyFit"]


class BatchLatencyFit(RlsCoefficients):
    C1_FLOOR = 1e-4  # c1 multiplies k * E[max] (seconds), not a count

    def __init__(self, c0: float = 0.005, c1: float = 0.2, *, forget: float = 0.995,
                 prior_weight: float = 5.0, noise_s: float = 0.005) -> None:
        if c0 < 0 or c1 <= 0:
            raise ValueError("c0 must be >= 0 and c1 > 0")
        if not prior_weight > 0 or not noise_s > 0:
            raise ValueError("prior_weight and noise_s must be positive")
        # RLS assumes unit noise; latencies are ~1e-2 s, so the prior covariance (each coefficient
        # uncertain by its own size, c0 by at least 10 ms) is divided by the noise variance: the
        # prior then counts as about ``prior_weight`` batches measured to ``noise_s``.
        spread = np.array([max(c0, 0.01), c1]) ** 2
        self._rls = Rls(c0, c1, np.diag(spread) / (noise_s**2 * prior_weight), forget=forget)

    def predict(self, size: int, expected_max: float) -> float:
        """Seconds a batch of ``size`` whose expected maximum is ``expected_max`` takes."""
        return self.c0 + self.c1 * size * expected_max

    def update(self, size: int, batch_max: float, seconds: float) -> bool:
        """Learn from one finished batch; False when the observation was unusable."""
        x_k = size * batch_max
        if size <= 0 or not np.isfinite(seconds) or seconds <= 0 or not np.isfinite(x_k) or x_k <= 0:
            return False
        self._rls.update(x_k, seconds)
        return True

    def coefficients(self) -> tuple[float, float]:
        return self.c0, self.c1
