"""`adaserve bench mosel --model`: a model without a modality profile is a usage error, not a run
on another model's profile."""

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from adaserve.bench.cli import register


def test_a_model_without_a_profile_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADASERVE_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("ADASERVE_REDIS_URL", raising=False)
    app = typer.Typer()
    register(app)
    res = CliRunner().invoke(app, ["bench", "mosel", "--model", "fsdd-cnn", "--no-live", "--out", str(tmp_path)])
    assert res.exit_code == 2
    assert "no profile of 'fsdd-cnn'" in res.output
    assert not list(tmp_path.glob("*.json"))


def test_the_live_ratio_is_per_repeat_with_its_spread() -> None:
    from adaserve.bench.mosel import live_ratio

    got = live_ratio({"none": [10.0, 8.0, None], "optimized": [20.0, 12.0, 30.0], "aggressive": [25.0, 10.0, None],
                      "optimized-shared": [40.0, 40.0, 40.0]}, 0.05)
    # The shared-correction twin is never "best"; a repeat where `none` is below the grid has no ratio.
    assert got["best_aware_by_repeat"] == ["aggressive", "optimized", "optimized"]
    assert got["ratio_best_aware_vs_none_by_repeat"] == [2.5, 1.5, None]
    assert got["ratio_best_aware_vs_none"] == 2.0 and got["ratio_spread"] == [1.5, 2.5]
    assert got["max_load_median"]["none"] == 9.0
