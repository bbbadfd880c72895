"""Batch size for an arrival rate (StarONNX Sec. 4.2, Fig. 2b) against brute force."""

from __future__ import annotations

import math

import pytest

from adaserve.planner.heft import RateMeter, batch_for_rate, max_latency


def latency(b: int) -> float:
    """A GPU-like batch latency: 2 ms fixed, 0.15 ms per request, concave past 16."""
    return 0.002 + 0.00015 * b + (0.0 if b <= 16 else -0.00003 * (b - 16))


def simulated_max_latency(b: int, rate: float, servers: int = 1, n: int = 4000) -> float:
    """Brute force: ``n`` arrivals every ``1/rate`` s, batches of ``b`` in order, FIFO servers."""
    free = [0.0] * servers
    worst = 0.0
    for k in range(n // b):
        first = k * b / rate
        ready = (k * b + b - 1) / rate
        i = min(range(servers), key=lambda j: free[j])
        end = max(ready, free[i]) + latency(b)
        free[i] = end
        worst = max(worst, end - first)
    return worst


@pytest.mark.parametrize("rate", [50.0, 400.0, 1500.0, 3000.0, 5000.0, 6500.0])
@pytest.mark.parametrize("servers", [1, 2])
def test_chosen_size_is_the_brute_force_optimum(rate: float, servers: int) -> None:
    chosen = batch_for_rate(rate, latency, 32, servers)
    sims = {b: simulated_max_latency(b, rate, servers) for b in range(1, 33)}
    best = min(sims.values())
    assert sims[chosen] <= best * (1 + 1e-6) + 1e-9, (chosen, sims[chosen], min(sims, key=sims.__getitem__), best)
    predicted = max_latency(chosen, rate, latency, servers)
    if math.isfinite(predicted):  # the steady-state formula is what the brute force measures
        assert math.isclose(predicted, sims[chosen], rel_tol=1e-6)
    else:  # no size keeps up: the pick still has the least latency the run saw
        assert chosen == 32


def test_the_size_grows_with_the_rate() -> None:
    sizes = [batch_for_rate(r, latency, 32) for r in (100.0, 1000.0, 3000.0, 6000.0)]
    assert sizes == sorted(sizes) and sizes[0] == 1 and sizes[-1] > 8


def test_a_rate_no_size_keeps_up_with_gets_the_highest_throughput() -> None:
    assert batch_for_rate(1e6, latency, 32) == 32


def test_rate_meter() -> None:
    m = RateMeter(window_s=1.0)
    for i in range(101):
        m.arrived(i * 0.01)
    assert math.isclose(m.rate(1.0), 100.0, rel_tol=1e-6)
    assert m.rate(5.0) == 0.0
