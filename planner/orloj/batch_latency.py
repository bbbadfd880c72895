"""Batch latency ``l_B = c0 + c1 * k * max`` (ORLOJ Eq. 3-5), with ``c0, c1`` fitted online.

Requests in a batch are padded to the longest one, so a batch of ``k`` costs like ``k`` copies of
its maximum. The regressor of a finished batch is ``k`` times its maximum execution time when the
per-request times are known (the profiler's measurements, or the simulator), else ``k`` times the
expected maximum under the current distributions. Recursive least squares with forgetting keeps
the fit current in O(1) per batch and holds the prior until feedback arrives.

The two coefficients are shared by every size, so they are only as good as the sizes that
feed them: at light load nearly every batch is small, ``c0`` and ``c1`` are confounded there,
and live the line under-predicted full batches by 0.3-1.6 ms while over-predicting small ones
(docs/orloj.md, "Eleventh session" and "Twelfth session"). ORLOJ places a request in every size
whose estimate still meets its deadline, so an optimistic estimate for the largest size sends
late batches.
``margin(k)`` is what the current line misses size ``k``'s recent batches by (the median
residual of the last ``WINDOW`` of them): added to the line, each size's estimate is honest
however the batches are spread over sizes, and it is computed against the coefficients of the
moment, so it does not go stale while they move.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Sequence

import numpy as np

from adaserve.planner.latency import Rls, RlsCoefficients

__all__ = ["BatchLatencyFit"]


class BatchLatencyFit(RlsCoefficients):
    C1_FLOOR = 1e-4  # c1 multiplies k * E[max] (seconds), not a count
    WINDOW = 16  # recent batches of one size that its margin reads: a few seconds at light load
    MIN_SEEN = 3  # batches of a size before its margin counts (the median of fewer is one stall)

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
        self._recent: dict[int, deque[tuple[float, float]]] = {}  # size -> (x, seconds) of its last batches

    def predict(self, size: int, expected_max: float) -> float:
        """Seconds a batch of ``size`` whose expected maximum is ``expected_max`` takes."""
        return self.c0 + self.c1 * size * expected_max

    def update(self, size: int, batch_max: float, seconds: float) -> bool:
        """Learn from one finished batch; False when the observation was unusable."""
        x_k = size * batch_max
        # math, not numpy: two numpy calls on scalars were half of this update's cost
        if size <= 0 or not math.isfinite(seconds) or seconds <= 0 or not math.isfinite(x_k) or x_k <= 0:
            return False
        self._rls.update(x_k, seconds)
        got = self._recent.get(size)
        if got is None:
            got = self._recent[size] = deque(maxlen=self.WINDOW)
        got.append((x_k, seconds))
        return True

    def margin(self, size: int) -> float:
        """Seconds the line under-predicts batches of ``size`` by, lately (negative: it
        over-predicts them); 0 until ``MIN_SEEN`` of them finished. The median, not the mean: a
        stall of the machine is tens of ms against a 2 ms batch. Never below ``-c0``: the line's
        intercept is what a correction may take away, a batch is never predicted free."""
        got = self._recent.get(size)
        if got is None or len(got) < self.MIN_SEEN:
            return 0.0
        c0, c1 = self.c0, self.c1
        return max(statistics.median([y - c0 - c1 * x for x, y in got]), -c0)

    def margins(self, sizes: Sequence[int]) -> tuple[float, ...]:
        """``margin`` of each of ``sizes``; a size not yet seen ``MIN_SEEN`` times takes the margin
        interpolated between the nearest seen sizes (held beyond the ends), 0 when none is seen.
        Left at 0 beside a corrected neighbour, an unseen size would be the optimistic one: a
        full batch corrected up, the size below it would take the batches that arrive late."""
        seen = [k for k in sizes if len(self._recent.get(k, ())) >= self.MIN_SEEN]
        if not seen:
            return (0.0,) * len(sizes)
        known = [self.margin(k) for k in seen]
        return tuple(float(m) for m in np.interp(sizes, seen, known))

    def coefficients(self) -> tuple[float, float]:
        return self.c0, self.c1
