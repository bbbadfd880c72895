"""`adaserve bench serving`: the JSON shape of a short real run, the summary, and a skipped split.

Nothing here asserts a timing: only that figures exist, are positive and add up.
"""

import json
from pathlib import Path

import pytest
from rich.progress import Progress

from adaserve.bench import serving_split
from adaserve.bench.serving_stack import summary
from adaserve.broker.errors import BuildError

from .conftest import bench_command

_invoke = bench_command("serving")


def test_generation_through_a_real_pipeline_reports_positive_medians(
        redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADASERVE_REDIS_URL", redis_url)
    monkeypatch.setenv("ADASERVE_DATA_DIR", str(tmp_path))
    res = _invoke("--json", "--only", "generation", "--models", "ee-lm-xs", "--rounds", "1", "--jobs", "2")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["bench"] == "serving" and "split" not in out
    (g,) = out["generation"]
    assert g["model"] == "ee-lm-xs" and g["variant"].startswith("depth")
    assert g["requests_per_job"] == 8 and g["new_tokens"] == 16
    assert len(g["prompt_lengths"]) == 8 and len(set(g["prompt_lengths"])) > 1
    assert g["pipeline_p50_ms"] > 0 and g["direct_p50_ms"] > 0
    assert g["ratio"] == pytest.approx(g["pipeline_p50_ms"] / g["direct_p50_ms"], rel=1e-2)
    assert len(g["runs"]) == 1 and all(v > 0 for v in g["runs"][0].values())


def test_an_unknown_section_is_a_usage_error() -> None:
    res = _invoke("--only", "generation,training")
    assert res.exit_code != 0 and "training" in res.output


def test_summary_pools_every_round_and_keeps_each_rounds_median() -> None:
    s = summary([[10.0, 30.0, 20.0], [40.0, 50.0, 60.0]], [[5.0, 5.0, 5.0], [10.0, 10.0, 10.0]])
    assert s["pipeline_p50_ms"] == 35.0 and s["direct_p50_ms"] == 7.5
    assert s["ratio"] == pytest.approx(35.0 / 7.5, abs=1e-3) and s["added_p50_ms"] == 27.5
    assert s["runs"] == [{"pipeline_p50_ms": 20.0, "direct_p50_ms": 5.0},
                         {"pipeline_p50_ms": 50.0, "direct_p50_ms": 10.0}]


def test_a_split_model_that_cannot_be_built_is_skipped_with_the_reason(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_wheel(*args: object, **kwargs: object) -> None:
        raise BuildError("effnet-lite0 needs the wheels efficientnet-lite-pytorch==0.1.0")

    monkeypatch.setattr("adaserve.models.registry.build_model", no_wheel)
    said: list[str] = []
    with Progress(disable=True) as bar:
        reason = serving_split.ensure_built(tmp_path, bar, said.append)
    assert reason is not None and "cannot be built" in reason and "wheels" in reason
    assert said and "adaserve models build --only effnet-lite0" in said[0]


@pytest.mark.parametrize("pools", ["cpu:cpu", "cpu", "gpu:"])
def test_split_pools_that_do_not_name_two_pools_are_a_usage_error(pools: str) -> None:
    res = _invoke("--only", "split", "--split-pools", pools)
    assert res.exit_code != 0 and "--split-pools" in res.output


def test_pools_named_gpu_run_on_the_gpu() -> None:
    assert [serving_split.device_of(p) for p in ("gpu", "gpu2", "cpu", "cpu2")] == ["gpu", "gpu", "cpu", "cpu"]


def test_a_wire_dtype_other_than_float32_or_float16_is_a_usage_error() -> None:
    res = _invoke("--only", "split", "--wire-dtype", "uint8")
    assert res.exit_code != 0 and "--wire-dtype" in res.output
