"""Batch latency models fitted online from finished batches.

``Rls`` is recursive least squares of ``y = c0 + c1 * x`` with exponential forgetting: each
finished batch updates the fit in O(1), old observations fade so drift is followed, and a prior
holds until feedback arrives. It is made robust in two ways a live pipeline needs (both below):
the covariance is bounded, and a residual far outside the usual is clipped before it is learnt.
``LinearLatency`` (``x`` = batch size) serves the foundation's EDF policy; ORLOJ's ``BatchLatencyFit`` uses the
same estimator with ``x = k * E[max]``.
"""

from __future__ import annotations

import math

import numpy as np


class Rls:
    """Two-coefficient recursive least squares with forgetting factor ``forget``.

    The state is five floats (the coefficients and the symmetric covariance's three entries),
    updated in closed form: every planner updates one of these per finished batch, and the same
    arithmetic through 2x2 numpy arrays cost about 12 us a batch in array overhead alone."""

    def __init__(self, c0: float, c1: float, covariance: np.ndarray, *, forget: float) -> None:
        if not 0.5 < forget <= 1.0:
            raise ValueError("forget must be in (0.5, 1]")
        self.c0, self.c1 = float(c0), float(c1)
        cov = np.asarray(covariance, dtype=np.float64)
        self._a, self._b, self._d = float(cov[0, 0]), 0.5 * float(cov[0, 1] + cov[1, 0]), float(cov[1, 1])
        self._forget = forget
        # Forgetting divides the covariance by ``forget`` at every update, also in directions the
        # data never excite: a pool that only ever runs batches of 32 says nothing about c0 apart
        # from c1, and after a few thousand such batches that direction's variance had grown
        # 10^6-fold, so one stalled batch of 31 moved the prediction for a batch of one to 1.2 s.
        # Live, every request then expired on arrival, nothing was dispatched, no feedback came to
        # correct it, and whole runs finished 0.000 (docs/orloj.md). The variance in any direction
        # is kept within the prior's largest: no direction becomes less known than before the first
        # observation, and the directions the data do excite keep their forgetting.
        self._max_var = float(np.linalg.eigvalsh(cov).max())
        # A stall of the machine (tens of ms against a 2 ms batch) is one residual 10-100 times
        # the usual; learnt whole, it moved the fit as far as the stall. Residuals are clipped to
        # ``CLIP`` times their running mean absolute size, which follows a real change of speed
        # within a few dozen batches (the scale grows with each clipped residual).
        self._scale = 0.0
        self.observations = 0

    CLIP = 4.0
    SCALE_RATE = 0.05
    WARM = 8  # observations before residuals are clipped: the scale is learnt first

    @property
    def theta(self) -> tuple[float, float]:
        return self.c0, self.c1

    @property
    def covariance(self) -> np.ndarray:
        return np.array([[self._a, self._b], [self._b, self._d]])

    def update(self, x: float, y: float) -> None:
        a, b, d, f = self._a, self._b, self._d, self._forget
        pv0, pv1 = a + b * x, b + d * x  # P v with v = (1, x)
        s = f + pv0 + x * pv1
        g0, g1 = pv0 / s, pv1 / s
        residual = float(y) - (self.c0 + self.c1 * x)
        if self.observations >= self.WARM:
            bound = self.CLIP * self._scale
            residual = min(max(residual, -bound), bound)
        self._scale += (abs(residual) - self._scale) * (self.SCALE_RATE if self.observations >= self.WARM
                                                         else 1.0 / (self.observations + 1))
        self.c0 += g0 * residual
        self.c1 += g1 * residual
        # (P - g (Pv)^T) / forget, written for the symmetric entries only: the array form had to be
        # symmetrised after every update, since rounding left it a little asymmetric, forgetting
        # multiplied that by 1/forget each time, and after ~7,000 batches p had a negative
        # eigenvalue and the fit ran away from its data (live, EDF's prediction for a batch of one
        # went 0.6 -> 52 ms within 40 batches that took 0.3-1 ms: docs/orloj.md).
        a, b, d = (a - g0 * pv0) / f, (b - g0 * pv1) / f, (d - g1 * pv1) / f
        if a + d > self._max_var:  # the trace bounds every variance
            a, b, d = _clip_eigen(a, b, d, self._max_var)
        self._a, self._b, self._d = a, b, d
        self.observations += 1


def _clip_eigen(a: float, b: float, d: float, top: float) -> tuple[float, float, float]:
    """The symmetric 2x2 ``[[a, b], [b, d]]`` with its eigenvalues above ``top`` lowered to it, in
    closed form (``numpy.linalg.eigh`` cost 15 us a batch on the planner's loop)."""
    half = 0.5 * (a + d)
    disc = math.sqrt(0.25 * (a - d) ** 2 + b * b)
    hi, lo = half + disc, half - disc
    if hi <= top:
        return a, b, d
    if lo >= top:
        return top, 0.0, top
    # the eigenvector of ``hi``: (b, hi - a), or (hi - d, b) where that one vanishes; the larger
    # of |hi - a| and |hi - d| is at least ``disc`` > 0 here (hi > top > lo), so it never does
    x, y = (b, hi - a) if abs(hi - a) >= abs(hi - d) else (hi - d, b)
    cut = (hi - top) / (x * x + y * y)
    return a - cut * x * x, b - cut * x * y, d - cut * y * y


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
        return max(self._rls.c0, 0.0)

    @property
    def c1(self) -> float:
        return max(self._rls.c1, self.C1_FLOOR)


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
