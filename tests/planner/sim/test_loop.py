"""The live planner's loop, replayed: dispatch instants and the freshness of the counts they used."""

from __future__ import annotations

import pytest

from adaserve.planner.sim.loop import ReplayedLoop


def test_it_dispatches_only_at_the_runs_dispatches() -> None:
    loop = ReplayedLoop([(0.010, 0.005), (0.020, 0.015)], step_s=0.005)
    assert loop.replaying and loop.next_at() == 0.010
    assert loop.dispatch(0.007) == (False, 0)
    assert loop.dispatch(0.010) == (True, 0)
    assert loop.next_at() == 0.020


def test_a_slot_frees_for_the_dispatch_whose_counts_were_read_after_its_ack() -> None:
    loop = ReplayedLoop([(0.010, 0.008), (0.020, 0.018)], step_s=0.005, ack_s=0.001)
    loop.finished(0.0075)  # acked at 8.5 ms: after the first dispatch's counts, before the second's
    loop.finished(0.0060)  # acked at 7 ms
    assert loop.dispatch(0.010) == (True, 1)
    assert loop.dispatch(0.020) == (True, 1)


def test_dispatches_the_simulation_jumped_past_are_skipped() -> None:
    loop = ReplayedLoop([(0.001, None), (0.002, None), (0.050, None)], step_s=0.004)
    assert loop.dispatch(0.030) == (False, 0)
    assert loop.next_at() == 0.050


def test_past_the_runs_dispatches_a_slot_is_free_once_acked() -> None:
    loop = ReplayedLoop([(0.001, None)], step_s=0.004, ack_s=0.001)
    loop.dispatch(0.001)
    loop.finished(0.010)
    assert not loop.replaying and loop.next_at() == pytest.approx(0.011)
    assert loop.dispatch(0.0105) == (True, 0)
    assert loop.dispatch(0.011) == (True, 1)


def test_without_counted_times_the_step_before_stands_for_them() -> None:
    # two steps: dispatches at 10 and 10.3 ms (one step), then 30 ms; a median step of 8 ms
    loop = ReplayedLoop([(0.010, None), (0.0103, None), (0.030, None)], step_s=0.008, ack_s=0.0)
    loop.finished(0.009)  # after the first step began (its counts at most 8 ms before: 2 ms)
    loop.finished(0.001)
    assert loop.dispatch(0.010) == (True, 1)  # counts of 2 ms: the first finish only
    assert loop.dispatch(0.0103) == (True, 0)
    assert loop.dispatch(0.030) == (True, 1)  # counts as of the step before (10 ms)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        ReplayedLoop([], step_s=-1.0)
