"""A bursty arrival process (the one pattern ``workload.arrivals`` does not have).

A two-state Markov-modulated Poisson process: bursts at ``factor`` times the quiet rate, lasting
``burst_s`` on average and covering ``share`` of the time, scaled so the mean rate is ``rate``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["bursty"]


def bursty(rate: float, duration_s: float, seed: int = 0, *, factor: float = 4.0, share: float = 0.2,
           burst_s: float = 1.0) -> np.ndarray:
    """Sorted arrival offsets (seconds) in ``[0, duration_s)`` with mean rate ``rate``."""
    if not rate > 0 or not duration_s > 0:
        raise ValueError("rate and duration must be positive")
    if not factor >= 1 or not 0 < share < 1 or not burst_s > 0:
        raise ValueError("factor >= 1, share in (0, 1) and burst_s > 0 are required")
    rng = np.random.default_rng(seed)
    quiet = rate / (1.0 + share * (factor - 1.0))
    quiet_s = burst_s * (1.0 - share) / share
    out: list[np.ndarray] = []
    t, in_burst = 0.0, bool(rng.random() < share)
    while t < duration_s:
        length = rng.exponential(burst_s if in_burst else quiet_s)
        lam = quiet * (factor if in_burst else 1.0)
        n = rng.poisson(lam * length)
        out.append(t + np.sort(rng.random(n)) * length)
        t += length
        in_burst = not in_burst
    times = np.concatenate(out) if out else np.empty(0)
    return times[times < duration_s]
