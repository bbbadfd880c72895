"""``adaserve tail``, ``stats`` and ``dead`` against a real server."""

from __future__ import annotations

import json
import time

import pytest
import typer
from typer.testing import CliRunner

from adaserve.broker import Keys, Settings
from adaserve.broker.codec import encode
from adaserve.broker.events import JobAccepted, JobCompleted, JobRejected
from adaserve.telemetry.cli import parse_window, register


@pytest.fixture
def cli(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> tuple[CliRunner, typer.Typer]:
    monkeypatch.setenv("ADASERVE_REDIS_URL", settings.redis_url)
    monkeypatch.setenv("ADASERVE_NAMESPACE", settings.namespace)
    monkeypatch.setenv("COLUMNS", "250")  # rich wraps table headers on a narrow terminal
    app = typer.Typer()
    register(app)
    return CliRunner(), app


def seed(r, settings: Settings) -> None:
    now = time.time() * 1000
    for ev in (
        JobAccepted(ts=now, job_id="j1", app="a", model="m", run="r1", requests=2, deadline_ms=100),
        JobCompleted(ts=now, job_id="j1", app="a", model="m", run="r1", requests=2, completed=2,
                     latency_ms=12, deadline_met=True),
        JobRejected(ts=now, job_id="j2", app="b", run="r2", requests=1, reason="schema"),
    ):
        r.xadd(Keys(settings.namespace).telemetry, {b"m": encode(ev)})


def test_stats_json_over_a_window_and_a_run(cli, settings: Settings, r) -> None:
    runner, app = cli
    seed(r, settings)
    out = runner.invoke(app, ["stats", "--window", "5m", "--json"])
    assert out.exit_code == 0, out.output
    s = json.loads(out.output.strip().splitlines()[-1])
    assert s["total"]["submitted"] == 3 and s["total"]["completed"] == 2 and s["total"]["rejected"] == 1
    assert s["span_s"] == 300
    out = runner.invoke(app, ["stats", "--run", "r1", "--json"])
    s = json.loads(out.output)
    assert s["run"] == "r1" and s["total"]["submitted"] == 2 and s["total"]["finish_rate"] == 1.0
    table = runner.invoke(app, ["stats", "--window", "1h"])
    assert table.exit_code == 0 and "finish rate" in table.output


def test_tail_no_follow_filters(cli, settings: Settings, r) -> None:
    runner, app = cli
    seed(r, settings)
    out = runner.invoke(app, ["tail", "--no-follow", "--json", "--type", "job.*", "--app", "a"])
    assert out.exit_code == 0, out.output
    lines = [json.loads(x) for x in out.output.strip().splitlines()]
    assert [x["event"] for x in lines] == ["job.accepted", "job.completed"]
    out = runner.invoke(app, ["tail", "--no-follow", "-t", "job.rejected"])
    assert "job.rejected" in out.output and "reason=schema" in out.output
    bad = runner.invoke(app, ["tail", "--no-follow", "-t", "nothing.*"])
    assert bad.exit_code == 2 and "matches no event type" in bad.output


def test_dead_json(cli, settings: Settings, r) -> None:
    runner, app = cli
    from adaserve.broker.streams import dead_letter
    dead_letter(r, Keys(settings.namespace).dead, reason="limit", detail="too big", source="jobs",
                entry_id="1-0", raw=b"x" * 123)
    out = runner.invoke(app, ["dead", "--json"])
    body = json.loads(out.output)
    assert body["total"] == 1 and body["letters"][0]["raw_bytes"] == 123


def test_commands_need_a_redis_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ADASERVE_REDIS_URL", raising=False)
    app = typer.Typer()
    register(app)
    out = CliRunner().invoke(app, ["stats", "--json"])
    assert out.exit_code == 2 and "ADASERVE_REDIS_URL is not set" in out.output


def test_parse_window() -> None:
    assert parse_window("90") == 90 and parse_window("5m") == 300 and parse_window("250ms") == 0.25
    with pytest.raises(Exception, match="positive duration"):
        parse_window("soon")
