"""The live planner's loop, replayed: its dispatch instants, and the slots each could count free."""

from __future__ import annotations

import pytest

from adaserve.planner.sim.loop import ReplayedLoop


def test_it_dispatches_only_at_the_runs_dispatches() -> None:
    loop = ReplayedLoop([0.010, 0.020], step_s=0.005)
    assert loop.replaying and loop.next_at() == 0.010
    assert loop.dispatch(0.007) == (False, 0)
    assert loop.dispatch(0.010) == (True, 0)
    assert loop.next_at() == 0.020


def test_a_slot_is_free_to_a_dispatch_when_acked_before_the_step_before_began() -> None:
    # steps at 10 ms (two dispatches, 0.3 ms apart), 30 ms and 50 ms, with a median step longer
    # than the gaps: the step before sets what each dispatch counts free
    loop = ReplayedLoop([0.010, 0.0103, 0.030, 0.050], step_s=0.030, ack_s=0.0)
    for finish in (0.001, 0.009, 0.020):
        loop.finished(finish)
    assert loop.dispatch(0.010) == (True, 0)  # no step before it
    assert loop.dispatch(0.0103) == (True, 0)  # the same step
    assert loop.dispatch(0.030) == (True, 2)  # as of 10 ms
    assert loop.dispatch(0.050) == (True, 1)  # as of 30 ms


def test_a_median_step_before_when_the_step_before_is_older() -> None:
    loop = ReplayedLoop([0.010, 0.030], step_s=0.005, ack_s=0.0)
    loop.finished(0.020)
    loop.finished(0.026)
    assert loop.dispatch(0.010) == (True, 0)
    assert loop.dispatch(0.030) == (True, 1)  # as of 25 ms, not 10


def test_the_ack_comes_after_the_finish() -> None:
    def at_20(ack_s: float) -> int:
        loop = ReplayedLoop([0.010, 0.020, 0.030], step_s=0.001, ack_s=ack_s)
        loop.finished(0.0175)
        loop.dispatch(0.010)
        return loop.dispatch(0.020)[1]

    assert at_20(0.0) == 1  # acked at 17.5 ms, before the counts of 19 ms
    assert at_20(0.002) == 0  # acked at 19.5 ms


def test_dispatches_the_simulation_jumped_past_are_skipped() -> None:
    loop = ReplayedLoop([0.001, 0.002, 0.050], step_s=0.004)
    assert loop.dispatch(0.030) == (False, 0)
    assert loop.next_at() == 0.050


def test_past_the_runs_dispatches_a_slot_is_free_once_acked() -> None:
    loop = ReplayedLoop([0.001], step_s=0.004, ack_s=0.001)
    loop.dispatch(0.001)
    loop.finished(0.010)
    assert not loop.replaying and loop.next_at() == pytest.approx(0.011)
    assert loop.dispatch(0.0105) == (True, 0)
    assert loop.dispatch(0.011) == (True, 1)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        ReplayedLoop([], step_s=-1.0)
