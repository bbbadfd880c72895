"""Admission control on constructed histories: refuse what the queue cannot serve in time, bound
the queue, admit whatever the evidence does not condemn."""

from __future__ import annotations

import pytest

from adaserve.planner.overload import Overload


def _measured(o: Overload, rps: int, seconds: range, model: str = "m") -> None:
    for s in seconds:
        for i in range(10):
            o.finished(model, rps // 10, s + i / 10)


def test_a_job_the_queue_cannot_serve_by_its_deadline_is_refused_with_when_to_retry() -> None:
    o = Overload(min_queue=64)
    _measured(o, 500, range(100, 105))
    assert o.drain_rps("m", 105.5) == 500.0
    why = o.verdict("m", queued=1000, requests=4, left_s=1.0, now_s=105.5)
    assert why is not None and "drain in ~2008 ms at 500/s" in why and why.endswith("retry in 2000 ms")
    assert o.verdict("m", queued=1000, requests=4, left_s=3.0, now_s=105.5) is None  # it can wait that long


def test_a_short_queue_and_thin_evidence_are_admitted() -> None:
    o = Overload(min_queue=64)
    assert o.verdict("m", queued=10_000, requests=4, left_s=0.01, now_s=5.0) is None  # nothing measured yet
    _measured(o, 500, range(0, 3))
    assert o.verdict("m", queued=63, requests=4, left_s=0.001, now_s=3.5) is None  # drains by itself
    thin = Overload(min_queue=64)
    _measured(thin, 50, range(0, 3))  # a best second of 50 requests says little about capacity
    assert thin.drain_rps("m", 3.5) is None and thin.verdict("m", 1000, 4, 0.001, 3.5) is None


def test_old_seconds_leave_the_horizon_and_the_current_one_does_not_count_yet() -> None:
    o = Overload(min_queue=64, horizon_s=10)
    _measured(o, 800, range(0, 2))
    assert o.drain_rps("m", 1.55) == 800.0  # spans up to 1.5 s are whole; the one at 1.5 is running
    assert o.drain_rps("m", 0.05) is None  # the first span is still running
    o.finished("m", 1, 30.0)
    assert o.drain_rps("m", 30.5) is None  # a burst after a long idle spell is admitted


def test_the_rate_is_the_pool_draining_a_backlog_not_the_offered_rate() -> None:
    # 300 requests/s offered, and one burst whose backlog the pool drained at 1,000/s: the best
    # whole second says 390/s, below what the pool does when it has work
    o = Overload(min_queue=64)
    _measured(o, 300, range(0, 2))
    o.finished("m", 100, 2.05)
    _measured(o, 300, range(3, 5))
    assert o.drain_rps("m", 5.5) == pytest.approx(1000.0)
    assert o.verdict("m", queued=196, requests=4, left_s=0.25, now_s=5.5) is None  # 200 at 1,000/s: 200 ms
    assert o.verdict("m", queued=296, requests=4, left_s=0.25, now_s=5.5) is not None


def test_the_fixed_bound_applies_even_without_a_measured_rate() -> None:
    o = Overload(max_queue=100, deadline_aware=False)
    assert o.verdict("m", queued=96, requests=4, left_s=10.0, now_s=1.0) is None
    why = o.verdict("m", queued=97, requests=4, left_s=10.0, now_s=1.0)
    assert why == "97 requests queued for m, the bound is 100"
    assert Overload(deadline_aware=False).verdict("m", 10**6, 4, 0.0, 1.0) is None  # off, unbounded


def test_models_are_measured_apart() -> None:
    o = Overload(min_queue=64)
    _measured(o, 500, range(0, 3), model="fast")
    assert o.drain_rps("slow", 3.5) is None


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        Overload(max_queue=-1)
    with pytest.raises(ValueError):
        Overload(span_s=0.0)


def test_a_finish_heard_late_still_counts_in_its_span() -> None:
    o = Overload(min_queue=64)
    _measured(o, 500, range(0, 2))
    assert o.drain_rps("m", 2.05) == 500.0  # asked once per span: later asks reuse it
    o.finished("m", 60, 1.95)  # a batch that finished before the span began, heard now
    assert o.drain_rps("m", 2.06) == pytest.approx(1100.0)


def _backlogged(o: Overload, start_s: float, spans: int, model: str = "m") -> None:
    """A check that saw a backlog in each of ``spans`` spans from ``start_s``."""
    for j in range(spans):
        o.verdict(model, queued=o.min_queue, requests=4, left_s=10.0, now_s=start_s + j * o.span_s + 0.05)


def test_a_backlog_drained_in_bursts_is_judged_at_what_it_sustains() -> None:
    # A planner behind on its loop: one span in five drains 200 requests, the others none. The
    # best span says 2,000/s; over the backlogged second the pool drained 400/s.
    o = Overload(min_queue=64)
    for i in range(20):
        o.finished("m", 200 if i % 5 == 0 else 0, 10 + i / 10 + 0.01)
    assert o.drain_rps("m", 11.05) == pytest.approx(2000.0)  # no backlog seen: the best span
    _backlogged(o, 11.0, 10)
    assert o.drain_rps("m", 12.05) == pytest.approx(400.0)
    assert o.verdict("m", queued=196, requests=4, left_s=0.25, now_s=12.05) is not None  # 200 at 400/s: 500 ms
    assert o.verdict("m", queued=96, requests=4, left_s=0.25, now_s=12.05) is None  # 250 ms


def test_a_sustained_rate_needs_most_of_the_last_spans_backlogged() -> None:
    o = Overload(min_queue=64)
    for i in range(20):
        o.finished("m", 200 if i % 5 == 0 else 0, 10 + i / 10 + 0.01)
    _backlogged(o, 11.0, 4)  # four of the last ten spans: a burst, not a backlog
    assert o.drain_rps("m", 12.05) == pytest.approx(2000.0)
    _backlogged(o, 11.5, 5)  # spans 11.5-11.9 too: five of ten
    assert o.drain_rps("m", 12.05) == pytest.approx(200 * 2 / (9 * 0.1))
    with pytest.raises(ValueError):
        Overload(sustained_spans=1)
