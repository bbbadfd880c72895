"""The planner's periodic report: decision times and how late it heard of finished batches."""

from __future__ import annotations

from adaserve.broker.events import HEARD_MAX_SPANS, PlannerState
from adaserve.planner.report import StateReport


def test_finishes_are_grouped_by_the_100_ms_they_fell_in_with_their_quantiles() -> None:
    rep = StateReport("p", 1.0)
    for i in range(5):  # finished in 1000..1099: heard 1, 2, 3, 4, 5 ms later
        rep.heard(1000.0 + 10 * i, 1000.0 + 11 * i + 1)
    rep.heard(1150.0, 1148.0)  # a clock a hair behind: not a negative delay
    state = rep.take(1200.0, {"m": []}, 0)
    assert [(s.at_ms, s.batches) for s in state.heard] == [(1000.0, 5), (1100.0, 1)]
    assert state.heard[0].quantiles_ms == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert state.heard[1].quantiles_ms == [0.0] * 5
    assert PlannerState.model_validate(state.model_dump()) == state  # what the wire carries
    assert rep.take(1300.0, {}, 0).heard == []  # the next interval starts empty


def test_a_report_keeps_the_latest_spans_within_its_bound() -> None:
    rep = StateReport("p", 1.0)
    for span in range(HEARD_MAX_SPANS + 10):
        rep.heard(100.0 * span, 100.0 * span + 2)
    spans = rep.take(0.0, {}, 0).heard
    assert len(spans) == HEARD_MAX_SPANS and spans[-1].at_ms == 100.0 * (HEARD_MAX_SPANS + 9)


def test_busy_steps_are_counted_with_their_quantiles() -> None:
    rep = StateReport("p", 1.0)
    for ms in (*[1.0] * 8, 0.5, 2.0, 3.0, 40.0, -0.1):  # a clock step back is not a negative busy time
        rep.stepped(ms)
    state = rep.take(0.0, {}, 0)
    # the 10, 30, 50, 70 and 90 % of 13 steps: the one 40 ms pause does not stand for a fifth
    assert state.steps == 13 and state.step_quantiles_ms == [0.5, 1.0, 1.0, 1.0, 3.0]
    assert PlannerState.model_validate(state.model_dump()) == state
    nothing = rep.take(1.0, {}, 0)
    assert nothing.steps == 0 and nothing.step_quantiles_ms == []


def test_the_lag_from_decision_to_server_is_counted_per_batch_with_its_quantiles() -> None:
    rep = StateReport("p", 1.0)
    rep.sent([1.0, 2.0, 2.0])
    rep.sent([0.5, 9.0, -0.2])  # a clock step back is not a negative lag
    state = rep.take(0.0, {}, 0)
    assert state.sends == 6 and state.send_quantiles_ms == [0.0, 0.5, 2.0, 2.0, 9.0]
    assert state.steps == 0  # the steps are their own figure
    assert PlannerState.model_validate(state.model_dump()) == state
    nothing = rep.take(1.0, {}, 0)
    assert nothing.sends == 0 and nothing.send_quantiles_ms == []
