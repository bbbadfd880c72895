"""Reading the telemetry stream of a real server: history, last, follow, filters."""

from __future__ import annotations

import threading
import time

import pytest

from adaserve.broker import Keys, Settings
from adaserve.broker.codec import encode
from adaserve.broker.events import (
    BatchFinished,
    JobAccepted,
    JobCompleted,
    PlannerState,
    RequestTiming,
    WorkerHeartbeat,
)
from adaserve.telemetry.reader import EventFilter, TelemetryReader, parse_types, run_events, shown_types


def put(r, settings: Settings, ev) -> str:
    return r.xadd(Keys(settings.namespace).telemetry, {b"m": encode(ev)}).decode()


def accepted(job: str, app: str = "a", run: str = "r") -> JobAccepted:
    return JobAccepted(ts=time.time() * 1000, job_id=job, app=app, model="m", run=run, requests=1, deadline_ms=10)


def batch(app: str, run: str) -> BatchFinished:
    it = RequestTiming(job_id="j", request_id="0", app=app, run=run, status="completed",
                       queue_ms=0, exec_ms=1, total_ms=1)
    return BatchFinished(ts=1, batch_id="b", pool="cpu", worker="w", model="m", size=1, exec_ms=1, items=[it])


def test_filter_by_type_glob_app_and_run() -> None:
    hb = WorkerHeartbeat(ts=1, worker="w", pool="cpu", slots=1)
    done = JobCompleted(ts=1, job_id="j", app="a", run="r", requests=1, latency_ms=1, deadline_met=True)
    assert EventFilter(("job.*",)).matches(done) and not EventFilter(("job.*",)).matches(hb)
    assert EventFilter(("worker.heartbeat", "batch.*")).matches(hb)
    assert EventFilter(app="a").matches(done) and not EventFilter(app="b").matches(done)
    assert not EventFilter(app="a").matches(hb)
    assert EventFilter(app="x", run="y").matches(batch("x", "y")) and not EventFilter(run="r").matches(batch("x", "y"))
    assert parse_types(["job.*,batch.finished", " worker.* "]) == ("job.*", "batch.finished", "worker.*")
    with pytest.raises(ValueError, match="matches no event type"):
        EventFilter(("jobs.*",))


def test_history_pages_and_skips_undecodable(settings: Settings, r) -> None:
    for i in range(12):
        put(r, settings, accepted(f"j{i}", app="a" if i % 2 else "b"))
    r.xadd(Keys(settings.namespace).telemetry, {b"m": b"\xc1 not msgpack"})
    reader = TelemetryReader(r, settings)
    got = list(reader.history(page=5))
    assert [g.event.job_id for g in got] == [f"j{i}" for i in range(12)]
    assert reader.undecodable == 1
    only_a = list(reader.history(keep=EventFilter(app="a"), page=5))
    assert [g.event.job_id for g in only_a] == [f"j{i}" for i in range(1, 12, 2)]


def test_history_since_uses_entry_time(settings: Settings, r) -> None:
    stream = Keys(settings.namespace).telemetry
    r.xadd(stream, {b"m": encode(accepted("old"))}, id="1000-0")
    r.xadd(stream, {b"m": encode(accepted("new"))}, id="5000-0")
    reader = TelemetryReader(r, settings)
    assert [g.event.job_id for g in reader.history(since_ms=2000)] == ["new"]
    assert [g.event.job_id for g in reader.history(until_ms=1000)] == ["old"]
    assert abs(reader.server_ms() - time.time() * 1000) < 60_000


def test_last_returns_the_most_recent_matches_in_order(settings: Settings, r) -> None:
    for i in range(30):
        put(r, settings, accepted(f"j{i}", app="a" if i % 3 == 0 else "b"))
    reader = TelemetryReader(r, settings)
    assert [g.event.job_id for g in reader.last(3, keep=EventFilter(app="a"))] == ["j21", "j24", "j27"]
    assert len(reader.last(100)) == 30


def test_follow_sees_only_new_matching_events(settings: Settings, r) -> None:
    put(r, settings, accepted("before"))
    reader = TelemetryReader(r, settings)
    after = reader.latest_id()

    def later() -> None:
        time.sleep(0.1)
        put(r, settings, accepted("x", app="other"))
        put(r, settings, accepted("y", app="mine"))

    t = threading.Thread(target=later)
    t.start()
    first = next(reader.follow(after=after, keep=EventFilter(app="mine"), block_ms=50, idle_s=10.0), None)
    t.join()
    assert first is not None and first.event.job_id == "y"  # "before" is old, "x" filtered out


def test_follow_stops_when_idle(settings: Settings, r) -> None:
    reader = TelemetryReader(r, settings)
    assert list(reader.follow(block_ms=20, idle_s=0.1)) == []


def test_heartbeats_are_shown_only_when_asked_for() -> None:
    hb = WorkerHeartbeat(ts=1, worker="w", pool="cpu", slots=1)
    done = JobCompleted(ts=1, job_id="j", app="a", run="r", requests=1, latency_ms=1, deadline_met=True)
    plain = EventFilter(shown_types(()))
    assert plain.matches(done) and not plain.matches(hb)
    assert EventFilter(shown_types((), heartbeats=True)).matches(hb)
    assert EventFilter(shown_types(("worker.*",))).matches(hb)
    both = EventFilter(shown_types(("job.*",), heartbeats=True))
    assert both.matches(hb) and both.matches(done)
    assert not EventFilter(shown_types(("job.*",))).matches(hb)
    report = PlannerState(ts=1, planner="p")  # the planner's once-a-second report is one too
    assert not plain.matches(report) and EventFilter(shown_types((), heartbeats=True)).matches(report)
    assert EventFilter(shown_types(("planner.state",))).matches(report)


def test_follow_waits_out_a_server_restart(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``tail`` keeps following across a broker restart: events published after the server came
    back from its AOF still arrive, on the same reader."""
    import redis

    from adaserve.broker import connect, load_settings
    from adaserve.embedded import EmbeddedServer

    server = EmbeddedServer(tmp_path / "server", fsync="always").start()
    try:
        settings = load_settings(redis_url=server.url, namespace="tr", data_dir=tmp_path)
        reader = TelemetryReader(connect(settings, block_ms=100), settings)
        keys = Keys("tr")
        publisher = redis.Redis.from_url(server.url)
        publisher.xadd(keys.telemetry, {b"m": encode(accepted("before"))})
        got: list[str] = []

        def restart() -> None:
            time.sleep(0.3)
            server.kill()
            time.sleep(0.5)
            server.start()
            publisher.xadd(keys.telemetry, {b"m": encode(accepted("after"))})

        threading.Thread(target=restart, daemon=True).start()
        for rec in reader.follow(after="0", block_ms=100, idle_s=5.0):
            got.append(rec.event.job_id)  # type: ignore[union-attr]
            if len(got) == 2:
                break
        assert got == ["before", "after"] and reader.outage.outages == 1
        publisher.close()
    finally:
        server.stop()


def test_a_runs_events_include_the_planner_reports_made_while_it_ran(settings: Settings, r) -> None:
    def state(ts: float) -> PlannerState:
        return PlannerState(ts=ts, planner="p")

    def job(ts: float, run: str) -> JobAccepted:
        return JobAccepted(ts=ts, job_id=f"{run}{ts}", app="a", model="m", run=run, requests=1, deadline_ms=10)

    for ev in (state(500), job(1000, "r"), state(1500), job(1800, "other"), job(2200, "r"), state(2600),
               state(3600)):
        put(r, settings, ev)
    got = run_events(TelemetryReader(r, settings), "r")
    # the reports during the run and the first after it (it covers the run's last heartbeat)
    assert [(e.event, e.ts) for e in got] == [("job.accepted", 1000), ("planner.state", 1500),
                                              ("job.accepted", 2200), ("planner.state", 2600)]
    assert run_events(TelemetryReader(r, settings), "none") == []
