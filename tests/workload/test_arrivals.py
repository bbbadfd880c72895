"""Arrival processes: counts, rates, determinism, and trace scaling (pure)."""

from __future__ import annotations

import numpy as np
import pytest

from adaserve.workload.arrivals import arrivals, constant, gaps_of, poisson, replay
from adaserve.workload.trace import load_trace


def test_constant_is_evenly_spaced_within_the_window() -> None:
    a = constant(4.0, 2.0)
    assert np.allclose(a, [0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75])
    assert len(constant(3.0, 1.0)) == 3 and len(constant(0.5, 3.0)) == 2


def test_poisson_is_seeded_and_has_the_rate() -> None:
    a, b, c = poisson(200, 50, seed=1), poisson(200, 50, seed=1), poisson(200, 50, seed=2)
    assert np.array_equal(a, b) and not np.array_equal(a[:100], c[:100])
    assert abs(len(a) / 50 - 200) < 200 * 0.03  # 10,000 expected; sd 100
    assert np.all(np.diff(a) >= 0) and a[0] >= 0 and a[-1] < 50
    gaps = np.diff(a)
    assert abs(gaps.std() / gaps.mean() - 1.0) < 0.05  # exponential gaps: cv = 1


@pytest.mark.parametrize("name", ["conv", "code"])
@pytest.mark.parametrize("rate,duration", [(50.0, 600.0), (5.0, 20.0), (1000.0, 3.0)])
def test_trace_replay_hits_the_target_mean_rate(name: str, rate: float, duration: float) -> None:
    a = replay(load_trace(name).gaps_s, rate, duration)
    assert abs(len(a) / duration - rate) <= rate * 0.03
    assert a[0] == 0 and a[-1] < duration and np.all(np.diff(a) >= 0)


def test_trace_replay_keeps_the_burst_structure() -> None:
    gaps = load_trace("conv").gaps_s
    a = replay(gaps, 100.0, 20.0)
    # The replayed gaps are the trace's first gaps, all scaled by one factor.
    ratio = np.diff(a) / gaps[: len(a) - 1]
    assert np.allclose(ratio, ratio[0])
    cv = np.diff(a).std() / np.diff(a).mean()
    assert abs(cv - gaps[: len(a) - 1].std() / gaps[: len(a) - 1].mean()) < 1e-9


def test_replay_wraps_a_short_trace_and_starts_where_asked() -> None:
    a = replay(np.array([1.0, 3.0]), 2.0, 4.0)  # 8 arrivals from gaps 1,3,1,3,... scaled to fill 4 s
    assert len(a) == 8 and np.allclose(np.diff(a), [0.25, 0.75] * 3 + [0.25])
    b = replay(np.array([1.0, 3.0]), 2.0, 4.0, start=1)
    assert np.allclose(np.diff(b)[:2], [0.75, 0.25])


def test_dispatch_and_bad_arguments() -> None:
    gaps = gaps_of(np.array([0.0, 1.0, 1.5, 4.0]))
    assert np.allclose(gaps, [1.0, 0.5, 2.5])
    assert np.array_equal(arrivals("trace", 3, 2, gaps_s=gaps, seed=5), arrivals("trace", 3, 2, gaps_s=gaps, seed=5))
    with pytest.raises(ValueError, match="unknown arrival pattern"):
        arrivals("bursty", 1, 1)
    with pytest.raises(ValueError, match="gaps"):
        arrivals("trace", 1, 1)
    with pytest.raises(ValueError, match="rate"):
        constant(0, 1)
    with pytest.raises(ValueError, match="duration"):
        poisson(1, -1)
    with pytest.raises(ValueError, match="zero"):
        replay(np.zeros(5), 1, 1)


@pytest.mark.parametrize(("call", "says"), [
    (lambda: arrivals("bursty", 1, 1), "unknown arrival pattern 'bursty' (choose from constant, poisson, trace)"),
    (lambda: arrivals("poisson", float("nan"), 1), "rate must be a positive number of arrivals per second, got nan"),
    (lambda: constant(2, 0), "duration must be a positive number of seconds, got 0"),
    (lambda: arrivals("trace", 1, 1), "the trace pattern needs the trace's inter-arrival gaps"),
    (lambda: replay(np.array([1.0, -1.0]), 1, 1), "inter-arrival gaps must be finite and non-negative"),
])
def test_bad_arrival_parameters_are_user_errors(call, says: str) -> None:
    from adaserve.broker.errors import ConfigError, InvalidArgument

    with pytest.raises(InvalidArgument) as exc:
        call()
    assert isinstance(exc.value, ConfigError) and str(exc.value) == says
