"""``adaserve placement``: histories as a profile seeds them, and as a planner published them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis
import typer
from typer.testing import CliRunner

from adaserve.broker import Keys, Settings
from adaserve.broker.codec import encode_map
from adaserve.planner.heft.cli import register

PROFILE = Path(__file__).resolve().parents[3] / "docs" / "gpu-h100.json"


def _invoke(*args: str) -> object:
    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)  # a group, so the command keeps its name
    return CliRunner().invoke(app, ["placement", *args])


def test_histories_a_profile_seeds() -> None:
    res = _invoke("--profile", str(PROFILE), "--model", "effnet-lite0", "--json")
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["planners"]["profile"]["histories"]
    assert len(rows) == 18 and all(r["seeded"] and not r["trusted"] for r in rows)


def test_what_a_planner_published(settings: Settings, r: redis.Redis[bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADASERVE_REDIS_URL", settings.redis_url or "")
    monkeypatch.setenv("ADASERVE_NAMESPACE", settings.namespace)
    state = {"histories": [{"model": "m", "part": "whole", "kind": "gpu", "batch": 8, "mean_ms": 1.5, "std_ms": 0.1,
                            "n": 12, "seeded": False, "trusted": True}],
             "rates": {"m": 420.0}, "batch_sizes": {"m": 8}, "handover": {}}
    r.hset(Keys(settings.namespace).placement, "planner-1", encode_map(state))
    res = _invoke("--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["planners"]["planner-1"]["rates"] == {"m": 420.0}
    res = _invoke()
    assert res.exit_code == 0 and "trusted" in res.stdout and "420.0 requests/s, batch size 8" in res.stdout
