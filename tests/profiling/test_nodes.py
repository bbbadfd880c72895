"""`adaserve profile nodes`: per-unit times from onnxruntime's real profiler and the rule's cut on them."""

from __future__ import annotations

import json
from typing import Any

import typer
from typer.testing import CliRunner

from adaserve.models.node_times import choice_of
from adaserve.profiling.cli import register


def _invoke(*args: str) -> Any:
    app = typer.Typer()
    register(app)
    return CliRunner().invoke(app, ["profile", "nodes", *args])


def test_prints_the_document_and_the_rule_s_cut() -> None:
    res = _invoke("ee-lm-s-split", "--batch", "2", "--runs", "3", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert [u["name"] for u in doc["units"]][:2] == ["embed", "block1.attn"] and doc["device"] == "cpu"
    assert doc["provider"] == "CPUExecutionProvider" and doc["runs"] == 3 and doc["batch"] == 2
    assert all(u["us"] > 0 for u in doc["units"]) and doc["split"]["cut"] == choice_of(doc)
    assert doc["units"][doc["split"]["cut"]]["crossing_bytes"] == doc["split"]["crossing_bytes"] == 32 * 128 * 4


def test_a_model_that_is_not_splittable_is_a_usage_error() -> None:
    res = _invoke("fsdd-cnn")
    assert res.exit_code == 2 and "splittable" in res.output


def test_the_human_line_names_the_cut() -> None:
    res = _invoke("ee-lm-s-split", "--batch", "1", "--runs", "2")
    assert res.exit_code == 0, res.output
    assert "cut after" in res.stdout and "band" in res.stdout
