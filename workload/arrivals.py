"""Arrival processes as pure functions: each returns sorted arrival offsets in seconds from 0.

No I/O here and nothing but numpy (and adaserve's errors: the parameters come from users), so
the load generator and the simulator draw the same arrivals from the same arguments. A trace
enters as its inter-arrival gaps (``trace.gaps_s``).
"""

from __future__ import annotations

import numpy as np

from adaserve.broker.errors import InvalidArgument

PATTERNS = ("constant", "poisson", "trace")


def _check(rate: float, duration_s: float) -> None:
    if not rate > 0 or not np.isfinite(rate):
        raise InvalidArgument(f"rate must be a positive number of arrivals per second, got {rate}")
    if not duration_s > 0 or not np.isfinite(duration_s):
        raise InvalidArgument(f"duration must be a positive number of seconds, got {duration_s}")


def constant(rate: float, duration_s: float) -> np.ndarray:
    """One arrival every ``1/rate`` seconds in ``[0, duration_s)``."""
    _check(rate, duration_s)
    n = int(np.ceil(duration_s * rate - 1e-9))
    return np.arange(n, dtype=np.float64) / rate


def poisson(rate: float, duration_s: float, seed: int = 0) -> np.ndarray:
    """A Poisson process of intensity ``rate`` on ``[0, duration_s)``, reproducible by ``seed``."""
    _check(rate, duration_s)
    rng = np.random.default_rng(seed)
    # Drawing more gaps than needed in one go keeps the output a pure function of the seed.
    expected = rate * duration_s
    n = int(expected + 6.0 * np.sqrt(expected) + 16)
    while True:
        times = np.cumsum(rng.exponential(1.0 / rate, size=n))
        if times[-1] >= duration_s:
            return times[times < duration_s]
        rng = np.random.default_rng(seed)
        n *= 2


def replay(gaps_s: np.ndarray, rate: float, duration_s: float, *, start: int = 0) -> np.ndarray:
    """Replay a trace's inter-arrival gaps, scaled so that the run's mean rate is ``rate``.

    The ``round(rate * duration_s)`` gaps from gap ``start`` on (wrapping around when the trace
    is shorter) are stretched by one common factor so that they fill ``duration_s`` exactly:
    the burst structure (order and relative size of the gaps) is kept, only the time unit
    changes, and a short run still gets the rate it asked for rather than that of whatever
    stretch of the trace it happened to start in.
    """
    _check(rate, duration_s)
    gaps = np.asarray(gaps_s, dtype=np.float64)
    if gaps.ndim != 1 or gaps.size == 0:
        raise InvalidArgument("a trace needs at least one inter-arrival gap")
    if np.any(gaps < 0) or not np.all(np.isfinite(gaps)):
        raise InvalidArgument("inter-arrival gaps must be finite and non-negative")
    if float(gaps.sum()) <= 0:
        raise InvalidArgument("a trace whose gaps are all zero has no rate to scale")
    k = max(1, round(rate * duration_s))
    idx = (start + np.arange(k)) % gaps.size
    window = gaps[idx]
    total = float(window.sum())
    if total <= 0:  # a window of simultaneous arrivals: fall back to the trace's mean gap
        window = np.full(k, float(gaps.mean()))
        total = float(window.sum())
    times = np.concatenate(([0.0], np.cumsum(window[:-1]))) * (duration_s / total)
    return times[times < duration_s]


def gaps_of(timestamps_s: np.ndarray) -> np.ndarray:
    """Inter-arrival gaps of sorted arrival timestamps (seconds)."""
    ts = np.sort(np.asarray(timestamps_s, dtype=np.float64))
    if ts.size < 2:
        raise InvalidArgument("a trace needs at least two arrivals")
    return np.diff(ts)


def arrivals(
    pattern: str, rate: float, duration_s: float, *, seed: int = 0, gaps_s: np.ndarray | None = None,
) -> np.ndarray:
    """Dispatch on ``pattern`` (one of ``PATTERNS``); ``trace`` needs ``gaps_s`` and uses
    ``seed`` to pick where in the trace to start."""
    if pattern == "constant":
        return constant(rate, duration_s)
    if pattern == "poisson":
        return poisson(rate, duration_s, seed)
    if pattern == "trace":
        if gaps_s is None:
            raise InvalidArgument("the trace pattern needs the trace's inter-arrival gaps")
        start = int(np.random.default_rng(seed).integers(0, len(gaps_s))) if seed else 0
        return replay(gaps_s, rate, duration_s, start=start)
    raise InvalidArgument(f"unknown arrival pattern {pattern!r} (choose from {', '.join(PATTERNS)})")
