"""`adaserve bench native` (pipeline_vs_native): the JSON of a short real run adds up; bad options are
usage errors; the GPU run skips with the reason where there is no GPU.

Nothing here asserts a timing: only that figures exist, are positive and add up.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from adaserve.workers.runtime import gpu_unavailable

from .conftest import bench_command

NO_GPU = gpu_unavailable()


_invoke = bench_command("native")


def test_a_short_real_run_reports_rates_and_a_breakdown_that_adds_up(
        redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADASERVE_REDIS_URL", redis_url)
    monkeypatch.setenv("ADASERVE_DATA_DIR", str(tmp_path))
    res = _invoke("--json", "--model", "fsdd-cnn", "--batch", "1,4", "--seconds", "0.5", "--rounds", "1")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["model"] == "fsdd-cnn" and out["device"] == "cpu" and "not GPU figures" in out["note"]
    assert [p["batch"] for p in out["points"]] == [1, 4]
    for p in out["points"]:
        assert p["native_rps"] > 0 and p["pipeline_rps"] > 0
        assert p["ratio"] == pytest.approx(p["pipeline_rps"] / p["native_rps"], rel=1e-2, abs=1e-3)
        b = p["breakdown"]
        stages = [b[k] for k in ("encode_ms", "redis_ms", "decode_ms", "run_ms", "publish_ms")]
        assert all(s > 0 for s in stages)
        # each of the five is rounded to 3 decimals on its own: their sum may differ by 5 x 0.0005
        assert b["stages_ms"] == pytest.approx(sum(stages), abs=3e-3)
        assert b["other_ms"] == pytest.approx(b["pipeline_batch_ms"] - b["stages_ms"], abs=2e-3)
        assert b["wire_bytes"]["batch"] >= b["wire_bytes"]["job"] > 0
    assert out["min_ratio"] == min(p["ratio"] for p in out["points"])
    assert out["points"][1]["breakdown"]["wire_bytes"]["job"] > out["points"][0]["breakdown"]["wire_bytes"]["job"]


def test_uint8_for_a_model_without_normalisation_is_a_usage_error(
        redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADASERVE_REDIS_URL", redis_url)
    monkeypatch.setenv("ADASERVE_DATA_DIR", str(tmp_path))
    res = _invoke("--model", "fsdd-cnn", "--wire", "uint8", "--batch", "1", "--seconds", "0.5", "--rounds", "1")
    assert res.exit_code == 2 and "normalisation" in res.output


@pytest.mark.parametrize("args", [["--batch", "0"], ["--batch", "a,b"], ["--device", "tpu"], ["--wire", "int4"]])
def test_bad_options_are_usage_errors(args: list[str]) -> None:
    assert _invoke(*args).exit_code == 2


def test_uint8_wire_inverts_the_declared_normalisation() -> None:
    import numpy as np

    from adaserve.bench.native import to_wire
    from adaserve.models.manifest import InputSpec, Normalize

    class R:
        model = "toy"
        specs = {"image": InputSpec(shape=(3, 2, 2), dtype="float32", normalize=Normalize(mean=(127.0,), std=(128.0,)))}  # noqa: RUF012

    px = np.arange(12, dtype=np.uint8).reshape(3, 2, 2) * 20
    floats = [{"image": ((px.astype(np.float32) - 127) / 128)}]
    (row,) = to_wire(floats, R(), "uint8")
    assert row["image"].dtype == np.uint8 and np.array_equal(row["image"], px)


@pytest.mark.skipif(NO_GPU is not None, reason=f"needs a GPU: {NO_GPU}")
def test_on_the_gpu_both_sides_run_there(redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from adaserve.bench.native import pipeline_vs_native

    monkeypatch.setenv("ADASERVE_REDIS_URL", redis_url)
    monkeypatch.setenv("ADASERVE_DATA_DIR", str(tmp_path))
    rep = pipeline_vs_native("fsdd-cnn", (8,), device="gpu", seconds=0.5, rounds=1)
    assert rep.device == "gpu" and rep.points[0].native_rps > 0 and rep.points[0].pipeline_rps > 0


@pytest.mark.skipif(NO_GPU is not None, reason=f"needs a GPU: {NO_GPU}")
def test_unit_times_on_the_gpu_come_from_the_cuda_provider() -> None:
    from adaserve.profiling.cli import register as profiling

    app = typer.Typer()
    profiling(app)
    res = CliRunner().invoke(app, ["profile", "nodes", "ee-lm-s-split", "--device", "gpu", "--runs", "3", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["provider"] == "CUDAExecutionProvider"
