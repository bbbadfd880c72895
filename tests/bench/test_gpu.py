"""`adaserve bench gpu`: the JSON shape of a real run on this host, bad options, and the arithmetic
of one measurement (stand-in runners: what is tested is the bookkeeping, not a timing)."""

import json
from pathlib import Path

import numpy as np
import pytest

from adaserve.bench import devices
from adaserve.bench.devices import Target, measure
from adaserve.workers.runtime import gpu_unavailable
from adaserve.workers.runtime.base import RunOutput

from .conftest import bench_command

_invoke = bench_command("gpu")


def test_a_real_run_reports_every_variant_and_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADASERVE_DATA_DIR", str(tmp_path))
    res = _invoke("--json", "--models", "fsdd-cnn,av-digits", "--batches", "1,4", "--repeats", "3")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert {(r["model"], r["variant"]) for r in out["rows"]} == {
        ("fsdd-cnn", "default"), ("av-digits", "audio"), ("av-digits", "image"), ("av-digits", "audio+image")}
    assert sorted({r["batch"] for r in out["rows"]}) == [1, 4]
    assert all(r["cpu_p50_ms"] > 0 for r in out["rows"])
    gpu = gpu_unavailable() is None
    assert (out["gpu_reason"] is None) == gpu
    assert all((r["gpu_p50_ms"] is not None) == gpu for r in out["rows"])
    assert Path(out["plot"]).is_file()


@pytest.mark.parametrize("batches", ["0", "1,x", "512"])
def test_bad_batch_sizes_are_a_usage_error(batches: str) -> None:
    res = _invoke("--batches", batches)
    assert res.exit_code != 0 and "--batches" in res.output


class _Fixed:
    """A runner whose answer is known; ``shift`` stands for a device's rounding."""

    def __init__(self, shift: float) -> None:
        self.shift = shift

    def run(self, inputs: dict[str, np.ndarray]) -> RunOutput:
        return RunOutput(outputs={"logits": inputs["x"] + self.shift})


def test_measure_compares_the_devices_and_reads_energy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(devices, "ENERGY_S", 0.01)
    joules = iter(np.arange(0.0, 1000.0, 0.5))
    target = Target("m", "v", "whole", {"cpu": _Fixed(0.0), "gpu": _Fixed(0.25), "gpu_bound": _Fixed(0.25)})
    row = measure(target, {"x": np.zeros((4, 3), np.float32)}, 5, lambda: float(next(joules)))
    assert row["batch"] == 4 and row["max_abs_diff"] == pytest.approx(0.25)
    assert row["gpu_speedup"] == pytest.approx(row["cpu_p50_ms"] / min(row["gpu_p50_ms"], row["gpu_bound_p50_ms"]))
    assert row["bound_speedup"] == pytest.approx(row["gpu_p50_ms"] / row["gpu_bound_p50_ms"])
    assert row["gpu_mj_per_request"] > 0 and row["gpu_watts"] > 0


def test_without_a_gpu_runner_the_gpu_figures_are_absent() -> None:
    target = Target("m", "v", "whole", {"cpu": _Fixed(0.0), "gpu": None, "gpu_bound": None})
    row = measure(target, {"x": np.zeros((2, 3), np.float32)}, 3, None)
    assert row["cpu_p50_ms"] > 0
    assert row["gpu_p50_ms"] is row["gpu_speedup"] is row["max_abs_diff"] is row["gpu_mj_per_request"] is None
