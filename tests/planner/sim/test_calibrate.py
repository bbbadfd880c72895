"""Calibrating the pipeline simulator from a run's events (built here, as a run would send them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaserve.broker.events import BatchFinished, JobAccepted
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
