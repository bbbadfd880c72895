from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from adaserve.models import cli


@pytest.fixture
def app(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> typer.Typer:
    monkeypatch.setenv("ADASERVE_DATA_DIR", str(tmp_path / "data"))
    app = typer.Typer()
    cli.register(app)
    return app


def test_list_json_is_one_object_with_a_row_per_variant(app: typer.Typer) -> None:
    result = CliRunner().invoke(app, ["models", "list", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["variants"]
    by_key = {(r["name"], r["variant"]): r for r in rows}
    fsdd = by_key[("fsdd-cnn", "default")]
    assert fsdd["kind"] == "whole" and fsdd["metric"] == "accuracy"
    assert fsdd["origin"] == "shipped" and fsdd["quality"] >= 0.9
    assert all(Path(p).is_file() for p in fsdd["artifacts"])
    for r in rows:
        assert {"name", "family", "kind", "artifacts", "metric", "quality"} <= set(r)


def test_list_table(app: typer.Typer) -> None:
    result = CliRunner().invoke(app, ["models", "list"])
    assert result.exit_code == 0 and "fsdd-cnn" in result.output


def test_build_tiny_into_out(app: typer.Typer, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["models", "build", "--only", "fsdd-cnn", "--tiny",
                                      "--out", str(tmp_path / "zoo")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "zoo" / "fsdd-cnn" / "manifest.json").is_file()


def test_build_unknown_name(app: typer.Typer) -> None:
    result = CliRunner().invoke(app, ["models", "build", "--only", "nope"])
    assert result.exit_code != 0
