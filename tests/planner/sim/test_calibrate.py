"""Calibrating the pipeline simulator from a run's events (built here, as a run would send them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaserve.broker.events import BatchDispatched, BatchFinished, JobAccepted, RequestTiming
from adaserve.planner.sim.calibrate import Calibration, calibrate


def _run(n: int = 40) -> list[object]:
    """Jobs submitted every 10 ms, accepted 2 ms later (jobs 0 mod 5: 12 ms), dispatched at 3 ms,
    started 1 ms after dispatch, served in 0.5 + 0.25 k ms of which 0.2 + 0.1 k in the runner."""
    evs: list[object] = []
    for j in range(n):
        sub = 1000.0 + 10.0 * j
        lag = 12.0 if j % 5 == 0 else 2.0
        evs.append(JobAccepted(ts=sub + lag, job_id=f"j{j}", app="a", model="m", requests=1, deadline_ms=50,
                               submitted_ms=sub))
        if j % 5 == 0:
            continue  # this job expired: no batch
        k = 1 + j % 4
        disp = sub + 3.0
        start = disp + 1.0
        fin = start + 0.5 + 0.25 * k
        evs.append(BatchDispatched(ts=disp, batch_id=f"b{j}", pool="cpu", model="m", size=k))
        items = [RequestTiming(job_id=f"j{j}", request_id=str(i), app="a", status="completed",
                               queue_ms=start - sub, exec_ms=0.2 + 0.1 * k, total_ms=fin - sub) for i in range(k)]
        evs.append(BatchFinished(ts=fin, batch_id=f"b{j}", pool="cpu", worker="w", model="m", size=k,
                                 exec_ms=0.2 + 0.1 * k, items=items))
    return evs


def test_costs_are_measured_from_the_events() -> None:
    cal = calibrate(_run())  # type: ignore[arg-type]
    assert cal.model == "m" and cal.batches == 32
    assert cal.transfer_ms == pytest.approx(1.0)
    assert cal.service_c0_ms == pytest.approx(0.5) and cal.service_c1_ms == pytest.approx(0.25)
    assert cal.exec_c0_ms == pytest.approx(0.2) and cal.exec_c1_ms == pytest.approx(0.1)
    assert max(abs(x) for x in cal.service_residual_ms) < 1e-6
    # every accepted job counts, the expired ones (12 ms) too
    assert sorted(set(cal.ingress_ms)) == [2.0, 12.0]
    assert cal.ingress_ms.count(12.0) == 8


def test_without_submitted_ms_the_finished_requests_give_the_ingress() -> None:
    evs = [e.model_copy(update={"submitted_ms": None}) if isinstance(e, JobAccepted) else e for e in _run()]
    cal = calibrate(evs)  # type: ignore[arg-type]
    assert set(cal.ingress_ms) == {2.0}


def test_a_run_without_batches_is_refused() -> None:
    with pytest.raises(ValueError, match="no finished batches"):
        calibrate([e for e in _run() if not isinstance(e, BatchFinished)], "m")  # type: ignore[arg-type]


def test_two_models_need_a_name(tmp_path: Path) -> None:
    evs = _run() + [e.model_copy(update={"model": "n"}) for e in _run() if isinstance(e, BatchFinished)]
    with pytest.raises(ValueError, match="name one"):
        calibrate(evs)  # type: ignore[arg-type]
    cal = calibrate(evs, "m")  # type: ignore[arg-type]
    cal.save(tmp_path / "cal.json")
    assert Calibration.load(tmp_path / "cal.json") == cal
