"""The time-varying priority score of ORLOJ, Eq. (1)-(2), in the form its priority queue needs.

For a request with deadline ``D`` whose batch latency ``L`` has a histogram, the score is a sum
over bins. Each bin contributes, at time ``t`` with ``tau = D - t`` the time left:

* ``tau > l2`` (the bin is safe now):        ``K (e^{b l2} - e^{b l1}) e^{-b D} e^{b t}``
* ``l1 < tau <= l2`` (now partly too late):  ``K - K e^{b l1} e^{-b D} e^{b t}``
* ``tau <= l1`` (too late either way):       ``0``

with ``K = h c / (E[L] b)`` and ``h`` the bin's *density* (mass over width: the paper's
frequency; with equal-width bins this is the same up to a constant). So at any moment the score
is ``alpha * e^{b t} + beta`` with ``alpha = a(tau) e^{-b D}`` and ``beta = beta(tau)``, where
``a`` and ``beta`` are step functions of ``tau`` that change only when ``tau`` crosses a bin
edge. ``ScoreSegments`` holds those steps; the crossings are the *milestones* of Algorithm 1,
between which nothing about a request needs recomputing.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np

__all__ = ["ScoreSegments", "priority_reference", "score_segments"]


@dataclass(frozen=True, slots=True)
class ScoreSegments:
    """Step functions of the time left ``tau``: segment ``j`` holds for ``breaks[j-1] < tau <= breaks[j]``."""

    breaks: tuple[float, ...]  # ascending
    a: tuple[float, ...]  # len(breaks) + 1
    beta: tuple[float, ...]

    def segment(self, tau: float) -> int:
        return bisect.bisect_left(self.breaks, tau)

    def segment_at(self, deadline: float, now: float) -> int:
        """The segment at time ``now``, consistent with ``milestone`` even where ``deadline - now``
        rounds to the other side of a break (so a milestone always moves a request on)."""
        seg = bisect.bisect_left(self.breaks, deadline - now)
        while seg > 0 and deadline - self.breaks[seg - 1] <= now:
            seg -= 1
        return seg

    def milestone(self, deadline: float, seg: int) -> float | None:
        """The time at which a request in ``seg`` enters the next segment down (None: never)."""
        return deadline - self.breaks[seg - 1] if seg > 0 else None

    def value(self, tau: float, b: float) -> float:
        """The score at ``tau`` time left (for tests and tools; the queue uses alpha/beta)."""
        j = self.segment(tau)
        return self.a[j] * math.exp(-b * tau) + self.beta[j]


def score_segments(edges: np.ndarray, mass: np.ndarray, mean_latency: float, b: float,
                   cost: float = 1.0) -> ScoreSegments:
    """Segments of Eq. (2) for a batch latency histogram (``edges`` in seconds, ``mass`` per bin)."""
    e = np.asarray(edges, dtype=np.float64)
    m = np.asarray(mass, dtype=np.float64)
    if not b > 0 or not mean_latency > 0:
        raise ValueError("b and the mean latency must be positive")
    if e.size != m.size + 1 or np.any(np.diff(e) <= 0):
        raise ValueError("a latency histogram needs increasing edges, one more than its bins")
    width = np.diff(e)
    k = (m / m.sum()) / width * cost / (mean_latency * b)
    # e^{b l2} - e^{b l1} = e^{b l1} (e^{b w} - 1): expm1 keeps the small difference exact
    safe = k * np.exp(b * e[:-1]) * np.expm1(b * width)
    tail = -k * np.exp(b * e[:-1])
    # segment j (tau between edge j-1 and edge j): bins < j-1 safe, bin j-1 partial, bins >= j late.
    # In Python floats (the same doubles): numpy scalars indexed one by one made this loop a third
    # of a table rebuild, which holds the planner's loop.
    safe_cum = np.concatenate([[0.0], np.cumsum(safe)]).tolist()
    a = [0.0, *(c + t for c, t in zip(safe_cum, tail.tolist())), safe_cum[-1]]
    beta = [0.0, *k.tolist(), 0.0]
    return _compress(e.tolist(), a, beta)


def _compress(edges: list[float], a: list[float], beta: list[float]) -> ScoreSegments:
    """Drop breaks where nothing changes (empty bins): fewer milestones, same function."""
    keep_breaks: list[float] = []
    keep_a, keep_b = [a[0]], [beta[0]]
    for j, edge in enumerate(edges):
        na, nb = a[j + 1], beta[j + 1]
        if na == keep_a[-1] and nb == keep_b[-1]:
            continue
        keep_breaks.append(edge)
        keep_a.append(na)
        keep_b.append(nb)
    return ScoreSegments(tuple(keep_breaks), tuple(keep_a), tuple(keep_b))


def priority_reference(t: float, deadline: float, edges: np.ndarray, mass: np.ndarray,
                       mean_latency: float, b: float, cost: float = 1.0) -> float:
    """Eq. (2) evaluated literally, bin by bin, with absolute times (a check for the fast path)."""
    e = np.asarray(edges, dtype=np.float64)
    m = np.asarray(mass, dtype=np.float64)
    m = m / m.sum()
    total = 0.0
    for l1, l2, mi in zip(e[:-1], e[1:], m):
        h = mi / (l2 - l1)
        k = h * cost / (mean_latency * b)
        if t < deadline - l2:
            total += k * (math.exp(b * l2) - math.exp(b * l1)) * math.exp(-b * deadline) * math.exp(b * t)
        elif t < deadline - l1:
            total += k - k * math.exp(b * l1) * math.exp(-b * deadline) * math.exp(b * t)
    return total
