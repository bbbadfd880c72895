"""Expected maximum of a batch's execution times, exactly, from histograms (ORLOJ Sec. 4.2).

A histogram is read as a piecewise-uniform density: within bin ``i`` (edges ``e[i]..e[i+1]``)
the CDF is linear. The CDF of the maximum of independent draws is the product of their CDFs
(Eq. 6 when they are identical; Eq. 8 of the paper is the same derivative written as an
inclusion-exclusion over subsets, which costs ``2^k`` terms where the product costs ``k``).
Inside a bin that product is a polynomial of degree ``k``, so the integral
``E[max] = e[0] + integral(1 - F_max)`` is computed exactly: in closed form for identical
draws, and by Gauss-Legendre quadrature with enough nodes to be exact for mixed ones. All
histograms of one call share the same edges.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

__all__ = ["Mixture", "cdf_at_edges", "expected_max_identical", "expected_max_mixed", "max_masses"]


def _check(edges: np.ndarray, mass: np.ndarray) -> None:
    if edges.ndim != 1 or edges.size < 2:
        raise ValueError("a histogram needs at least two edges")
    if np.any(np.diff(edges) <= 0):
        raise ValueError("histogram edges must be strictly increasing")
    if mass.shape[-1] != edges.size - 1:
        raise ValueError(f"{mass.shape[-1]} bin masses for {edges.size - 1} bins")
    if np.any(mass < 0) or not np.all(np.isfinite(mass)):
        raise ValueError("bin masses must be finite and non-negative")


def cdf_at_edges(mass: np.ndarray) -> np.ndarray:
    """The CDF at every edge (``F[0] = 0``, ``F[-1] = 1``) of a histogram given by bin masses."""
    m = np.asarray(mass, dtype=np.float64)
    total = m.sum(axis=-1, keepdims=True)
    if np.any(total <= 0):
        raise ValueError("a histogram needs a positive total mass")
    cdf = np.cumsum(m / total, axis=-1)
    zero = np.zeros((*m.shape[:-1], 1))
    out = np.concatenate([zero, cdf], axis=-1)
    out[..., -1] = 1.0  # rounding must not leave the last edge at 0.9999999
    return out


def expected_max_identical(edges: np.ndarray, mass: np.ndarray, k: int) -> float:
    """``E[max]`` of ``k`` i.i.d. draws from one histogram (Eq. 5-6), in closed form."""
    e = np.asarray(edges, dtype=np.float64)
    m = np.asarray(mass, dtype=np.float64)
    _check(e, m)
    if k < 1:
        raise ValueError("k must be at least 1")
    f = cdf_at_edges(m)
    w = np.diff(e)
    lo, hi = f[:-1], f[1:]
    slope = (hi - lo) / w
    flat = slope * w < 1e-12
    # integral over a bin of (1 - (lo + slope*u)^k) du, u in [0, w]
    safe = np.where(flat, 1.0, slope)
    curved = w - (hi ** (k + 1) - lo ** (k + 1)) / ((k + 1) * safe)
    part = np.where(flat, w * (1.0 - lo**k), curved)
    return float(e[0] + part.sum())


@lru_cache(maxsize=64)
def _gauss(nodes: int) -> tuple[np.ndarray, np.ndarray]:
    x, wts = np.polynomial.legendre.leggauss(nodes)
    return (x + 1.0) / 2.0, wts / 2.0  # mapped to [0, 1]


def _product_cdf(f: np.ndarray, m: np.ndarray, counts: np.ndarray, frac: np.ndarray) -> np.ndarray:
    """Product of CDFs at fractions ``frac`` of every bin: shape (bins, len(frac))."""
    out = np.ones((f.shape[1] - 1, frac.size))
    for j, n in enumerate(counts):
        if n:
            fj = f[j, :-1, None] + m[j, :, None] * frac[None, :]
            out *= np.clip(fj, 0.0, 1.0) ** int(n)
    return out


class Mixture:
    """Histograms on one grid, checked and normalised and their CDFs taken once, for draws in any
    counts.

    ORLOJ's tables ask for the same two histograms (a request's app and the pool) at every batch
    size: checking and normalising them once per size was half of a table rebuild, which holds
    the planner's loop (docs/orloj.md, eleventh session). Each figure is computed exactly as the
    one-off functions below compute it."""

    __slots__ = ("cdf", "edges", "mass")

    def __init__(self, edges: np.ndarray, masses: Sequence[np.ndarray] | np.ndarray) -> None:
        e = np.asarray(edges, dtype=np.float64)
        m = np.atleast_2d(np.asarray(masses, dtype=np.float64))
        _check(e, m)
        self.edges = e
        self.mass = m / m.sum(axis=1, keepdims=True)
        self.cdf = cdf_at_edges(self.mass)

    def _counts(self, counts: Sequence[int] | np.ndarray) -> np.ndarray:
        c = np.asarray(counts, dtype=np.int64).reshape(-1)
        if c.size != self.mass.shape[0]:
            raise ValueError(f"{c.size} counts for {self.mass.shape[0]} histograms")
        if np.any(c < 0) or c.sum() < 1:
            raise ValueError("counts must be non-negative with at least one draw")
        return c

    def expected_max(self, counts: Sequence[int] | np.ndarray) -> float:
        """``E[max]`` of independent draws, ``counts[j]`` of them from histogram ``j`` (Eq. 7-9)."""
        c = self._counts(counts)
        frac, wts = _gauss(int(c.sum()) // 2 + 1)  # n nodes integrate degree 2n-1 >= k exactly
        inner = (1.0 - _product_cdf(self.cdf, self.mass, c, frac)) @ wts
        return float(self.edges[0] + (np.diff(self.edges) * inner).sum())

    def max_masses(self, counts: Sequence[int] | np.ndarray) -> np.ndarray:
        """Probability that the maximum falls in each bin (exact: the CDF product at the edges)."""
        c = self._counts(counts)
        prod = np.ones(self.edges.size)
        for j, n in enumerate(c):
            if n:
                prod *= self.cdf[j] ** int(n)
        return np.diff(prod)


def expected_max_mixed(edges: np.ndarray, masses: Sequence[np.ndarray] | np.ndarray,
                       counts: Sequence[int] | np.ndarray) -> float:
    """``E[max]`` of independent draws, ``counts[j]`` of them from histogram ``masses[j]`` (Eq. 7-9)."""
    return Mixture(edges, masses).expected_max(counts)


def max_masses(edges: np.ndarray, masses: Sequence[np.ndarray] | np.ndarray,
               counts: Sequence[int] | np.ndarray) -> np.ndarray:
    """Probability that the maximum falls in each bin (exact: the CDF product at the edges)."""
    return Mixture(edges, masses).max_masses(counts)
