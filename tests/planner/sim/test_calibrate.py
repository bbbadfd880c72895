"""Calibrating the pipeline simulator from a run's events (built here, as a run would send them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaserve.broker.events import BatchFinished, HeardSpan, JobAccepted, JobRejected, PlannerState
from adaserve.planner.sim.calibrate import Calibration, calibrate


def test_costs_are_measured_from_the_events(synthetic_run: list[object]) -> None:
    cal = calibrate(synthetic_run)  # type: ignore[arg-type]
    assert cal.model == "m" and cal.batches == 32
    assert cal.transfer_ms == pytest.approx(1.0)
    assert cal.service_c0_ms == pytest.approx(0.5) and cal.service_c1_ms == pytest.approx(0.25)
    assert cal.exec_c0_ms == pytest.approx(0.2) and cal.exec_c1_ms == pytest.approx(0.1)
    assert max(abs(x) for x in cal.service_residual_ms) < 1e-6
    # every accepted job counts, the expired ones (12 ms) too
    assert sorted(set(cal.ingress_ms)) == [2.0, 12.0]
    assert cal.ingress_ms.count(12.0) == 8


def test_requests_a_worker_ended_unrun_are_not_its_service(synthetic_run: list[object]) -> None:
    """Each batch also carries requests the worker ended unrun (their deadlines passed first), and
    one batch ran none: the fit is still of the requests each batch ran."""
    from adaserve.broker.events import RequestTiming

    def unrun(ev: BatchFinished, n: int) -> BatchFinished:
        gone = [RequestTiming(job_id=ev.items[0].job_id, request_id=f"x{i}", app="a", run="r1", status="expired",
                              queue_ms=0.0, exec_ms=0.0, total_ms=ev.items[0].total_ms + 7.0) for i in range(n)]
        return ev.model_copy(update={"items": [*gone, *ev.items], "size": ev.size + n, "expired": n})

    evs = [unrun(e, 3) if isinstance(e, BatchFinished) else e for e in synthetic_run]
    whole = unrun(next(e for e in synthetic_run if isinstance(e, BatchFinished)), 2)
    evs.append(whole.model_copy(update={"items": whole.items[:2], "size": 2, "exec_ms": 0.0}))
    cal = calibrate(evs)  # type: ignore[arg-type]
    assert cal.batches == 32 and cal.transfer_ms == pytest.approx(1.0)
    assert cal.service_c0_ms == pytest.approx(0.5) and cal.service_c1_ms == pytest.approx(0.25)


def test_refused_jobs_and_the_admission_controls_memory_are_measured(synthetic_run: list[object]) -> None:
    refused = JobRejected(ts=1405.0, job_id="late", run="r1", requests=1, reason="overloaded", model="m",
                          submitted_ms=1395.0)

    def done(ts: float, size: int, model: str = "m", next_pool: str | None = None) -> BatchFinished:
        return BatchFinished(ts=ts, batch_id=f"p{ts}", pool="cpu", worker="w", model=model, size=size, exec_ms=1.0,
                             items=[], next_pool=next_pool)

    before = [done(200.0, 8), done(600.0, 4), done(900.0, 5, next_pool="gpu"), done(950.0, 7, model="other"),
              done(1500.0, 9)]
    cal = calibrate([*synthetic_run, refused], before=before)
    assert len(cal.ingress_ms) == len(cal.submitted_run_ms) == 41 and cal.ingress_ms[-1] == 10.0
    assert cal.start_ms == 1000.0 and cal.submitted_run_ms[-1] == 395.0
    # whole batches of this model that finished before the run began, per second of the clock
    assert cal.drained == [(0, 12)]
    assert cal.drained_spans == [(200, 8), (600, 4)]  # and per 100 ms span, as admission measures them
    assert len(cal.batch_run_ms) == len(cal.transfer_run_ms) == cal.batches and cal.batch_run_ms[0] == 13.0
    # what the planner's policy learnt from (as `Follower._finished`: not a part, whichever pool is next),
    # oldest first, in ms before the run
    assert cal.learnt_before == [(-800.0, 8, 1.0), (-400.0, 4, 1.0), (-100.0, 5, 1.0)]


def test_how_late_the_planner_heard_of_finishes_is_kept_per_span(synthetic_run: list[object]) -> None:
    assert calibrate(synthetic_run).heard_ms == []  # a planner that did not report it: heard at once
    spans = [HeardSpan(at_ms=1000.0, batches=3, quantiles_ms=[1.0, 1.5, 2.0, 4.0, 9.0]),
             HeardSpan(at_ms=1100.0, batches=1, quantiles_ms=[3.0] * 5)]
    reports = [PlannerState(ts=1150.0, planner="p", heard=spans), PlannerState(ts=2150.0, planner="p")]
    cal = calibrate([*synthetic_run, *reports])
    assert cal.heard_ms == [1.0, 1.5, 2.0, 4.0, 9.0, 3.0, 3.0, 3.0, 3.0, 3.0]
    # each at the middle of its span, in ms after the run's first submission (1000)
    assert cal.heard_run_ms == [50.0] * 5 + [150.0] * 5
    assert Calibration.model_validate_json(cal.model_dump_json()) == cal


def test_the_planners_busy_steps_come_from_its_reports_when_it_gave_them(synthetic_run: list[object]) -> None:
    inferred = calibrate(synthetic_run)  # no report says: the step is inferred from acceptances
    reports = [PlannerState(ts=1150.0, planner="p", steps=30, step_quantiles_ms=[0.2, 0.4, 0.5, 0.8, 3.0]),
               PlannerState(ts=1050.0, planner="p", steps=3, step_quantiles_ms=[1.0, 1.0, 1.0, 1.0, 1.0]),
               PlannerState(ts=1250.0, planner="p", steps=0)]
    cal = calibrate([*synthetic_run, *reports])
    # each quantile a fifth of the report's steps: 30 steps as 6 of each, 3 steps as 1 of each
    assert cal.step_ordered and len(cal.step_ms) == 35 and cal.step_ms != inferred.step_ms
    assert cal.step_ms[:5] == [1.0] * 5  # in run order: the report at 1050 first
    assert cal.step_ms[5:] == [x for x in (0.2, 0.4, 0.5, 0.8, 3.0) for _ in range(6)]
    few = calibrate([*synthetic_run, PlannerState(ts=1150.0, planner="p", steps=5, step_quantiles_ms=[1.0] * 5)])
    assert few.step_ms == inferred.step_ms  # too few measured steps to stand for the run


def test_the_lag_from_decision_to_server_comes_from_the_planners_reports(synthetic_run: list[object]) -> None:
    assert calibrate(synthetic_run).send_ms == []  # reports that predate it: the wait runs from the decision
    reports = [PlannerState(ts=1150.0, planner="p", sends=25, send_quantiles_ms=[0.5, 1.0, 1.5, 2.0, 8.0]),
               PlannerState(ts=1050.0, planner="p", sends=5, send_quantiles_ms=[3.0] * 5)]
    cal = calibrate([*synthetic_run, *reports])
    assert cal.send_ms == [3.0] * 5 + [x for x in (0.5, 1.0, 1.5, 2.0, 8.0) for _ in range(5)]
    assert Calibration.model_validate_json(cal.model_dump_json()) == cal


def test_the_workers_slots_come_from_the_planners_reports(synthetic_run: list[object]) -> None:
    assert calibrate(synthetic_run).slots is None  # reports that predate the count: the default
    reports = [PlannerState(ts=1150.0, planner="p", slots={"cpu": 2}),
               PlannerState(ts=1250.0, planner="p", slots={"cpu": 4, "gpu": 0})]
    cal = calibrate([*synthetic_run, *reports])
    assert cal.slots == 4
    assert Calibration.model_validate_json(cal.model_dump_json()).slots == 4


def test_a_job_is_read_no_later_than_the_jobs_after_it(synthetic_run: list[object]) -> None:
    # One planner reads the stream in order: a job stamped 30 ms after it landed, followed by one
    # the planner read 11 ms after the first landed, was read then too (its stamp came later).
    stamped_late = JobAccepted(ts=1031.0, job_id="x", app="a", model="m", run="r1", requests=1, deadline_ms=50,
                               submitted_ms=1001.0)
    cal = calibrate([*synthetic_run, stamped_late])
    assert cal.submitted_run_ms[:3] == [0.0, 1.0, 10.0] and cal.ingress_ms[:3] == [12.0, 11.0, 2.0]


def test_without_submitted_ms_the_finished_requests_give_the_ingress(synthetic_run: list[object]) -> None:
    evs = [e.model_copy(update={"submitted_ms": None}) if isinstance(e, JobAccepted) else e for e in synthetic_run]
    cal = calibrate(evs)  # type: ignore[arg-type]
    assert set(cal.ingress_ms) == {2.0}


def test_a_run_without_batches_is_refused(synthetic_run: list[object]) -> None:
    with pytest.raises(ValueError, match="no finished batches"):
        calibrate([e for e in synthetic_run if not isinstance(e, BatchFinished)], "m")  # type: ignore[arg-type]


def test_two_models_need_a_name(tmp_path: Path, synthetic_run: list[object]) -> None:
    evs = synthetic_run + [e.model_copy(update={"model": "n"}) for e in synthetic_run if isinstance(e, BatchFinished)]
    with pytest.raises(ValueError, match="name one"):
        calibrate(evs)  # type: ignore[arg-type]
    cal = calibrate(evs, "m")  # type: ignore[arg-type]
    cal.save(tmp_path / "cal.json")
    assert Calibration.load(tmp_path / "cal.json") == cal


def test_what_a_user_points_the_simulator_at_fails_as_a_data_error(tmp_path: Path) -> None:
    from adaserve.broker.errors import DataError
    from adaserve.broker.profiles import Profile

    (tmp_path / "empty.json").write_text("{}")
    (tmp_path / "text.json").write_text("model,batch\n")
    with pytest.raises(DataError, match=r"empty.json is not a saved calibration: model: Field required"):
        Calibration.load(tmp_path / "empty.json")
    with pytest.raises(DataError, match=r"text\.json is not a saved calibration: not JSON"):
        Calibration.load(tmp_path / "text.json")
    with pytest.raises(DataError, match=r"^not an adaserve profile: model: Field required"):
        Profile.from_json(b"{}")


def test_every_dispatch_is_kept(synthetic_run: list[object]) -> None:
    """For the simulator's replay of the planner's loop (``loop.py``): each ``batch.dispatched`` of
    the model, those whose batch never ran included, in ms after the run's first submission."""
    from adaserve.broker.events import BatchDispatched

    never_ran = BatchDispatched(ts=1200.0, batch_id="gone", pool="cpu", model="m", size=1)
    other = BatchDispatched(ts=1201.0, batch_id="other", pool="cpu", model="n", size=1)
    cal = calibrate([*synthetic_run, never_ran, other], "m")  # type: ignore[list-item]
    assert len(cal.dispatch_run_ms) == 33 and 200.0 in cal.dispatch_run_ms
    assert cal.dispatch_run_ms[0] == 13.0  # job 1: submitted 10 ms after job 0, dispatched 3 ms later
    assert cal.dispatch_run_ms == sorted(cal.dispatch_run_ms)


def test_a_batch_sent_while_the_worker_ran_the_one_before_is_flagged(tmp_path: Path,
                                                                     synthetic_run: list[object]) -> None:
    """Its transfer is then only the gap after that batch: the simulator draws from the others."""
    from adaserve.broker.errors import DataError
    from adaserve.broker.events import BatchDispatched

    assert calibrate(synthetic_run).transfer_busy == [False] * 32  # each sent 7 ms after the last finished
    # b2, dispatched at 1023, sent at 1014.5 instead: b1 ran from 1014 to 1015
    evs = [e.model_copy(update={"ts": 1014.5}) if isinstance(e, BatchDispatched) and e.batch_id == "b2" else e
           for e in synthetic_run]
    cal = calibrate(evs)  # type: ignore[arg-type]
    assert cal.transfer_busy == [False, True] + [False] * 30
    assert cal.transfer_run_ms[1] == pytest.approx(24.0 - 15.0)  # started at 1024, b1 finished at 1015
    cal.save(tmp_path / "cal.json")
    assert Calibration.load(tmp_path / "cal.json") == cal
    (tmp_path / "bad.json").write_text(cal.model_copy(update={"transfer_busy": [True]}).model_dump_json())
    with pytest.raises(DataError, match="transfer_busy has 1 flags for 32 transfers"):
        Calibration.load(tmp_path / "bad.json")


def test_a_run_of_two_apps_keeps_each_jobs_app_and_each_apps_lines() -> None:
    from adaserve.broker.events import BatchDispatched, RequestTiming

    evs: list[object] = []
    for j in range(60):
        sub, app = 1000.0 + 10.0 * j, "l" if j % 3 == 0 else "s"
        evs.append(JobAccepted(ts=sub + 1.0, job_id=f"j{j}", app=app, model="m", run="r", requests=1,
                               deadline_ms=300.0 if app == "l" else 30.0, submitted_ms=sub))
        k = 1 + j % 4
        apps = [app] * k if j % 5 else ["s"] * (k - 1) + ["l"]  # every fifth batch mixes in a dear request
        dear = "l" in apps
        svc, run = (3.0 + 1.2 * k, 2.0 + 1.0 * k) if dear else (0.5 + 0.25 * k, 0.2 + 0.1 * k)
        disp = sub + 2.0
        evs.append(BatchDispatched(ts=disp, batch_id=f"b{j}", pool="cpu", model="m", size=k))
        items = [RequestTiming(job_id=f"j{j}", request_id=str(i), app=a, run="r", status="completed",
                               queue_ms=disp + 1.0 - sub, exec_ms=run, total_ms=disp + 1.0 + svc - sub)
                 for i, a in enumerate(apps)]
        evs.append(BatchFinished(ts=disp + 1.0 + svc, batch_id=f"b{j}", pool="cpu", worker="w", model="m", size=k,
                                 exec_ms=run, items=items))
    cal = calibrate(evs)  # type: ignore[arg-type]
    assert cal.job_apps == ["l" if j % 3 == 0 else "s" for j in range(60)]
    assert cal.app_deadline_ms == {"l": 300.0, "s": 30.0} and cal.app_order == ["s", "l"]
    assert cal.app_lines["l"] == pytest.approx((3.0, 1.2, 2.0, 1.0), abs=1e-3)
    assert cal.app_lines["s"] == pytest.approx((0.5, 0.25, 0.2, 0.1), abs=1e-3)
    assert max(abs(x) for x in cal.service_residual_ms) < 1e-3  # each batch against its dearest app's line
    assert cal.line_of({"s", "l"}) == cal.app_lines["l"] and cal.line_of({"x"}) == (
        cal.service_c0_ms, cal.service_c1_ms, cal.exec_c0_ms, cal.exec_c1_ms)
    with pytest.raises(ValueError, match="job_apps"):
        Calibration.model_validate({**cal.model_dump(), "job_apps": ["s"]})
