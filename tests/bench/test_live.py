"""`adaserve bench live`: a real stack, two policies, one small cell; the verdict's arithmetic."""

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from adaserve.bench.cli import register
from adaserve.bench.live import summarise, verdict

from .conftest import bench_command


def _cell(policy: str, load: float, runs: list[float]) -> dict[str, object]:
    return summarise("m", load, 10.0, 30.0, policy,
                     [{"finish_rate": r, "sim_finish_rate": r - 0.01, "unfinished": 0} for r in runs])


def test_verdict_counts_cells_where_orloj_is_below_the_best_baselines_minimum() -> None:
    cells = [_cell("orloj", 0.5, [0.90, 0.91, 0.92]), _cell("edf", 0.5, [0.95, 0.96, 0.97]),
             _cell("orloj", 1.2, [0.80, 0.81, 0.82]), _cell("edf", 1.2, [0.70, 0.72, 0.85])]
    v = verdict(cells)  # type: ignore[arg-type]
    assert v["orloj_below_best_baseline"] == 1  # 0.91 < 0.95 at 0.5; 0.81 >= 0.70 at 1.2
    assert v["overload_vs_edf"] == [{"model": "m", "load": 1.2, "deadline_ms": 30.0, "orloj_min": 0.8,
                                     "edf_max": 0.85, "beyond_spread": False}]
    assert v["sim_within_0.05"] == v["sim_cells"] == 4 and v["sim_abs_error_max"] == pytest.approx(0.01)


def test_paired_differences_are_run_by_run_and_split_by_regime() -> None:
    cells = [_cell("orloj", 0.5, [0.90, 0.95, 0.99]), _cell("edf", 0.5, [0.91, 0.94, 0.98]),
             _cell("orloj", 1.2, [0.80, 0.81, 0.82]), _cell("edf", 1.2, [0.70, 0.72, 0.85])]
    p = verdict(cells)["orloj_paired"]  # type: ignore[arg-type]
    assert p["light"]["edf"] == {"mean": pytest.approx(0.0033, abs=1e-4), "wins": 2, "losses": 1, "runs": 3,
                                 "sign_p": 1.0}
    assert (p["overload"]["edf"]["wins"], p["overload"]["edf"]["losses"]) == (2, 1)
    assert p["overload"]["edf"]["mean"] == pytest.approx((0.10 + 0.09 - 0.03) / 3, abs=1e-4)


def test_summary_is_median_min_max_of_the_runs() -> None:
    c = _cell("fifo", 0.8, [0.7, 0.9, 0.8])
    assert (c["finish_rate"], c["min"], c["max"], c["runs"]) == (0.8, 0.7, 0.9, [0.7, 0.9, 0.8])


@pytest.mark.slow
@pytest.mark.usefixtures("own_stack")
def test_one_cell_live_with_the_simulator_beside(tmp_path: Path) -> None:
    png = tmp_path / "live.png"
    res = bench_command("live")("--json", "--models", "ee-audio", "--policies", "orloj,edf", "--loads", "0.3",
                                "--deadlines", "100", "--repeats", "1", "--duration", "1", "--plot", str(png))
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["capacity_rps"]["ee-audio"]["100"] > 100 and "100" in out["capacity_clamped"]["ee-audio"]
    assert all(c["capacity_rps"] == out["capacity_rps"]["ee-audio"]["100"] for c in out["cells"])
    assert [c["policy"] for c in out["cells"]] == ["orloj", "edf"]
    for c in out["cells"]:
        assert 0.0 <= c["min"] <= c["finish_rate"] <= c["max"] <= 1.0
        assert c["sim_finish_rate"] is not None and 0.0 <= c["sim_finish_rate"] <= 1.0
        assert c["finish_rate"] > 0.5  # a light load with a generous deadline is served
    assert all(g is not None and g > 0 for c in out["cells"] for g in c["loop_gap_ms"])
    assert out["orloj_below_best_baseline"] in (0, 1) and out["sim_cells"] == 2
    assert png.stat().st_size > 0


@pytest.mark.slow
@pytest.mark.usefixtures("own_stack")
def test_a_given_capacity_skips_the_search(tmp_path: Path) -> None:
    res = bench_command("live")("--json", "--models", "ee-audio", "--policies", "edf", "--loads", "0.5",
                                "--deadlines", "100", "--repeats", "1", "--duration", "1", "--capacity", "400",
                                "--calibrations", str(tmp_path / "cal"), "--plot", str(tmp_path / "live.png"))
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["capacity_rps"] == {"ee-audio": {"100": 400.0}}
    assert out["capacity_clamped"] == {"ee-audio": {"100": None}}
    (cell,) = out["cells"]
    assert cell["jobs_per_s"] == 50.0 and set(cell["lost"]) == set(cell["sim_lost"]) == {"late", "expired", "rejected"}
    # The saved calibration replays the run: `adaserve sim` gives the bench's own prediction.
    from adaserve.cli import app as main_app

    saved = tmp_path / "cal" / f"{cell['run_ids'][0]}.json"
    from adaserve.planner.sim.calibrate import Calibration

    # the live planner reported how late it heard of the run's finishes, and the bench kept it
    cal = Calibration.load(saved)
    assert cal.heard_ms and len(cal.heard_ms) == len(cal.heard_run_ms) and min(cal.heard_ms) >= 0.0
    # and how long its steps that sent a batch were busy (50 jobs at 50/s rarely pile up, so the
    # acceptances alone would not have given the step)
    assert cal.step_ordered and len(cal.step_ms) >= 20 and 0.0 <= min(cal.step_ms) <= max(cal.step_ms) < 100.0
    again = CliRunner().invoke(main_app, ["sim", "--calibration", str(saved), "--policy", "edf", "--rate", "50",
                                          "--duration", "1", "-k", "4", "--deadline-ms", "100", "--seed", "0", "--json"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout.splitlines()[-1])["results"][0]["finish_rate"] == cell["sim_finish_rate"]


def test_each_deadline_gets_its_own_capacity_and_its_cells_are_fractions_of_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A shorter deadline sustains less (ee-audio at 30 ms: 0.72-0.88 of its capacity at 100 ms on
    a 2-core host), so one capacity for both put the shorter deadline's "0.8" above its capacity.
    The stack and the runs are stand-ins: what is checked is which capacity each cell's rate uses."""
    from collections.abc import Iterator
    from contextlib import contextmanager

    from adaserve.bench import live

    searched: list[float] = []
    served: list[tuple[float, float]] = []

    class Stack:
        def restart_planner(self, policy: str) -> None: ...

    @contextmanager
    def fake_stack(*a: object, **k: object) -> Iterator[Stack]:
        yield Stack()

    def fake_capacity(stack: object, model: str, deadline_ms: float) -> tuple[float, None]:
        searched.append(deadline_ms)
        return (4000.0 if deadline_ms == 100 else 3000.0), None

    def fake_run(stack: object, policy: str, model: str, rate: float, dl: float, *a: object) -> dict[str, object]:
        served.append((dl, rate))
        return {"finish_rate": 1.0, "sim_finish_rate": None, "unfinished": 0}

    monkeypatch.setattr(live, "live_stack", fake_stack)
    monkeypatch.setattr(live, "capacity", fake_capacity)
    monkeypatch.setattr(live, "warm_up", lambda *a, **k: None)
    monkeypatch.setattr(live, "run_cell", fake_run)
    app = typer.Typer()
    register(app)
    res = CliRunner().invoke(app, ["bench", "live", "--json", "--models", "ee-audio", "--policies", "edf",
                                   "--loads", "0.5", "--deadlines", "30,100", "--repeats", "1",
                                   "--plot", str(tmp_path / "live.png")])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert searched == [100.0, 30.0]
    assert out["capacity_rps"] == {"ee-audio": {"100": 4000.0, "30": 3000.0}}
    assert sorted(served) == [(30.0, 0.5 * 3000 / 4), (100.0, 0.5 * 4000 / 4)]
    assert {c["deadline_ms"]: (c["capacity_rps"], c["jobs_per_s"]) for c in out["cells"]} == {
        30.0: (3000.0, 375.0), 100.0: (4000.0, 500.0)}


def test_unknown_policy_or_bad_loads_are_usage_errors(tmp_path: Path) -> None:
    app = typer.Typer()
    register(app)
    for args in (["--policies", "orloj,lifo"], ["--loads", "0.5,x"], ["--deadlines", "-3"]):
        res = CliRunner().invoke(app, ["bench", "live", *args, "--plot", str(tmp_path / "x.png")])
        assert res.exit_code != 0, args


def test_the_capacity_search_judges_a_rate_by_two_probes_of_three() -> None:
    from adaserve.bench.live import bisect_rate

    true_capacity = 3000.0
    # a rate far above the capacity that passes once, as on a quiet moment, and one below it
    # that fails once, as in a slow spell: neither decides alone
    lucky, unlucky = {4000.0}, {2000.0}
    calls: list[float] = []

    def probe(rps: float) -> bool:
        calls.append(rps)
        if rps in lucky:
            lucky.discard(rps)
            return True
        if rps in unlucky:
            unlucky.discard(rps)
            return False
        return rps <= true_capacity

    rate, clamped = bisect_rate(probe, 250.0, 64_000.0, 8)  # its probes: 4,000, then 1,000, then 2,000
    assert calls[:8] == [4000.0] * 3 + [1000.0] * 2 + [2000.0] * 3 and clamped is None
    assert 0.8 * true_capacity <= rate <= true_capacity
    # two probes that agree decide without a third
    calls.clear()
    bisect_rate(probe, 250.0, 64_000.0, 8)
    assert len(calls) == 16
    always, never = bisect_rate(lambda r: True, 250.0, 16_000.0, 3), bisect_rate(lambda r: False, 250.0, 16_000.0, 3)
    assert always[1] == "ceiling" and never == (250.0, "floor")


def test_a_runs_longest_gap_between_dispatches_is_reported_per_run() -> None:
    from adaserve.bench.live import longest_gap_ms

    assert longest_gap_ms([30.0, 0.0, 10.0, 12.5, 52.0]) == 22.0  # unordered, as events arrive
    assert longest_gap_ms([5.0]) is None and longest_gap_ms([]) is None
    c = summarise("m", 0.5, 10.0, 30.0, "orloj", [
        {"finish_rate": 1.0, "sim_finish_rate": 1.0, "unfinished": 0, "loop_gap_ms": 9.5},
        {"finish_rate": 0.99, "sim_finish_rate": 0.99, "unfinished": 0, "loop_gap_ms": 31.5}])
    assert c["loop_gap_ms"] == [9.5, 31.5]
