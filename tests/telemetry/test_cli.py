"""``adaserve tail``, ``stats`` and ``dead`` against a real server."""

from __future__ import annotations

import json
import time

import pytest
import typer
from typer.testing import CliRunner

from adaserve.broker import Keys, Settings
from adaserve.broker.codec import encode
from adaserve.broker.events import (
    BatchDispatched,
    BatchFinished,
    JobAccepted,
    JobCompleted,
    JobRejected,
    RequestTiming,
    WorkerHeartbeat,
)
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
    assert s["window_s"] == 300 and s["span_s"] == 1.0  # three events at one instant: one second of load
    out = runner.invoke(app, ["stats", "--run", "r1", "--json"])
    s = json.loads(out.output)
    assert s["run"] == "r1" and s["total"]["submitted"] == 2 and s["total"]["finish_rate"] == 1.0
    table = runner.invoke(app, ["stats", "--window", "1h"])
    assert table.exit_code == 0 and "latency per app" in table.output and "0.667" in table.output


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


def test_tail_hides_heartbeats_unless_asked(cli, settings: Settings, r) -> None:
    runner, app = cli
    seed(r, settings)
    beat = WorkerHeartbeat(ts=time.time() * 1000, worker="w1", pool="cpu", slots=2, busy=1, models=["m"],
                           inputs={"m": {"x": {"shape": [1, 8000], "dtype": "float32"}}})
    r.xadd(Keys(settings.namespace).telemetry, {b"m": encode(beat)})
    plain = runner.invoke(app, ["tail", "--no-follow"])
    assert plain.exit_code == 0 and "job.rejected" in plain.output and "worker.heartbeat" not in plain.output
    for asked in (["--heartbeats"], ["-t", "worker.*"], ["-t", "worker.heartbeat"]):
        out = runner.invoke(app, ["tail", "--no-follow", *asked])
        (line,) = [x for x in out.output.splitlines() if "worker.heartbeat" in x]
        assert "busy=1/2" in line and "float32" not in line and len(line) < 120, asked
    both = runner.invoke(app, ["tail", "--no-follow", "--json", "--heartbeats", "-t", "job.rejected"])
    assert [json.loads(x)["event"] for x in both.output.splitlines()] == ["job.rejected", "worker.heartbeat"]


def test_top_once_shows_the_window(cli, settings: Settings, r) -> None:
    """Real events on a real server, one frame of ``top``: the figures the events make."""
    runner, app = cli
    stream = Keys(settings.namespace).telemetry
    now = time.time() * 1000

    def put(ev: object) -> None:
        r.xadd(stream, {b"m": encode(ev)})

    def it(job: str, total: float) -> RequestTiming:
        return RequestTiming(job_id=job, request_id="0", app="a", status="completed", queue_ms=1, exec_ms=2,
                             total_ms=total, exit=1)

    for j in range(6):
        put(JobAccepted(ts=now, job_id=f"j{j}", app="a", model="fsdd-cnn", requests=1, deadline_ms=50))
    put(BatchDispatched(ts=now, batch_id="b1", pool="cpu", model="fsdd-cnn", size=2))
    put(BatchFinished(ts=now, batch_id="b1", pool="cpu", worker="cpu-w1", model="fsdd-cnn", size=2, exec_ms=3,
                      items=[it("j0", 10), it("j1", 80)]))
    for j, ok in (("j0", True), ("j1", False)):
        put(JobCompleted(ts=now, job_id=j, app="a", model="fsdd-cnn", requests=1, completed=1,
                         latency_ms=10 if ok else 80, deadline_met=ok))
    put(BatchDispatched(ts=now, batch_id="b2", pool="cpu", model="fsdd-cnn", size=3))
    put(WorkerHeartbeat(ts=now, worker="cpu-w1", pool="cpu", slots=2, busy=1, models=["fsdd-cnn"]))
    out = runner.invoke(app, ["top", "--once", "--json", "--window", "1m"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.output)
    (m,) = d["models"]
    assert (m["model"], m["queued"], m["running"], m["ended"], m["slo_violations"]) == ("fsdd-cnn", 1, 3, 2, 1)
    assert m["exits"] == {"1": 2} and m["placements"] == {"cpu": 2}
    (w,) = d["workers"]
    assert (w["worker"], w["slots"], w["busy"]) == ("cpu-w1", 2, 1)
    assert d["pools"][0]["mean_batch"] == 2.0
    screen = runner.invoke(app, ["top", "--once", "--window", "1m"], env={"COLUMNS": "80"})
    assert screen.exit_code == 0, screen.output
    assert max(map(len, screen.output.splitlines())) <= 80
    assert "fsdd-cnn" in screen.output and "cpu-w1" in screen.output and "0.500" in screen.output
    bad = runner.invoke(app, ["top", "--json"])
    assert bad.exit_code == 2 and "--once" in bad.output


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
