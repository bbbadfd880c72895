"""The chaos suite: real faults (a broker SIGKILLed and restarted, workers and planners SIGKILLed or
frozen) under real load on real processes, each counting every request: submitted = completed +
expired + rejected + failed + unfinished, none unfinished where the server kept its data, none with
two results, and every service process still up."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from adaserve.bench import chaos, chaos_faults
from adaserve.cli import app

pytestmark = pytest.mark.slow


def _run(tmp_path: Path, name: str, **opts: float) -> chaos.Outcome:
    sc = chaos_faults.scenario(name)
    with chaos.chaos_stack(tmp_path / name, **sc.stack) as stack:  # type: ignore[arg-type]
        stack.wait_ready(120)
        out = chaos.run(stack, name, sc.fault, rate=30.0, before_s=1.5, after_s=opts.get("after_s", 3.0))
    assert out.submitted == out.completed + out.expired + out.rejected + out.failed + out.unfinished
    assert out.duplicated == 0 and out.alive, out
    assert out.submitted > 0 and out.first_result_s is not None, out  # served again after the fault
    return out


@pytest.mark.parametrize("name", ["broker-restart-always", "broker-restart-everysec"])
def test_a_broker_restarted_from_its_aof_loses_nothing_and_stops_no_process(tmp_path: Path, name: str) -> None:
    out = _run(tmp_path, name)
    assert out.unfinished == 0 and out.completed == out.submitted, out


def test_a_broker_that_comes_back_empty_is_survived_and_its_loss_is_counted(tmp_path: Path) -> None:
    out = _run(tmp_path, "broker-restart-nopersist")
    # what the server held at the crash is gone; everything submitted afterwards is served
    assert out.completed > 0 and out.completed + out.unfinished == out.submitted, out


def test_a_killed_worker_restarted_loses_nothing(tmp_path: Path) -> None:
    out = _run(tmp_path, "worker-sigkill")
    assert out.unfinished == 0 and out.failed == 0, out


def test_a_killed_planner_is_taken_over_by_the_other(tmp_path: Path) -> None:
    out = _run(tmp_path, "planner-sigkill", after_s=5.0)
    assert out.unfinished == 0 and out.backlog_s is not None, out


def test_a_surge_past_capacity_is_refused_overloaded_and_the_steady_load_recovers(tmp_path: Path) -> None:
    sc = chaos_faults.with_surge(chaos_faults.scenario("overload"), 3.0)
    with chaos.chaos_stack(tmp_path / "overload") as stack:
        stack.wait_ready(120)
        out = chaos.run(stack, sc.name, sc.fault, rate=30.0, before_s=1.5, after_s=4.0, deadline_ms=sc.deadline_ms)
    x = out.extra
    assert out.alive and out.unfinished == 0 and out.duplicated == 0 and x["surge_unfinished"] == 0, out
    assert out.submitted == out.completed + out.expired + out.rejected + out.failed
    # every request of the surge ended, and the planner refused at once what it could not serve in time
    assert sum(v for key, v in x.items() if key.startswith("surge_") and key.split("_", 1)[1] in
               ("completed", "expired", "rejected", "failed", "overloaded")) == x["surge_requests"]
    assert x.get("surge_overloaded", 0) > 0 and x["dead_entries"] == 0, x
    assert out.recover_s is not None and out.finish_after is not None, out


def test_bench_chaos_rejects_an_unknown_scenario() -> None:
    done = CliRunner().invoke(app, ["bench", "chaos", "--only", "meteor-strike"])
    assert done.exit_code == 2 and "unknown scenario" in done.output
