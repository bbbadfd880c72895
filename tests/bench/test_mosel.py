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
