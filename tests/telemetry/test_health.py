"""``adaserve health`` against the real server: a real planner's periodic state, workers' heartbeats."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import redis
import typer
from typer.testing import CliRunner

from adaserve.broker import Keys, Settings, decode, encode
from adaserve.broker.events import PlannerState, WorkerHeartbeat
from adaserve.planner.config import PlannerConfig
from adaserve.planner.service import Planner
from adaserve.telemetry.cli import register
from adaserve.telemetry.health import check, host_names


@pytest.fixture
def cli(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> tuple[CliRunner, typer.Typer]:
    monkeypatch.setenv("ADASERVE_REDIS_URL", settings.redis_url)
    monkeypatch.setenv("ADASERVE_NAMESPACE", settings.namespace)
    monkeypatch.setenv("ADASERVE_WORKER_TTL_S", str(settings.worker_ttl_s))
    app = typer.Typer()
    register(app)
    return CliRunner(), app


@pytest.fixture
def planner(settings: Settings, r: redis.Redis[bytes]) -> Iterator[Planner]:
    p = Planner(settings, PlannerConfig())
    stop = threading.Event()
    t = threading.Thread(target=p.run, args=(stop,), daemon=True)
    t.start()
    yield p
    stop.set()
    t.join(10)
    assert not t.is_alive()


def beat(r: redis.Redis[bytes], settings: Settings, worker: str, age_s: float = 0.0) -> None:
    sec, usec = r.time()
    hb = WorkerHeartbeat(ts=sec * 1000 + usec / 1000 - age_s * 1000, worker=worker, pool="cpu", slots=2)
    r.hset(Keys(settings.namespace).workers, worker, encode(hb))


def test_a_running_planner_is_healthy_and_its_state_is_kept_and_published(
        planner: Planner, r: redis.Redis[bytes], settings: Settings, cli: tuple[CliRunner, typer.Typer]) -> None:
    k = Keys(settings.namespace)
    deadline = time.monotonic() + 10
    while not r.hexists(k.planners, planner.consumer) and time.monotonic() < deadline:
        time.sleep(0.05)
    state = decode(r.hget(k.planners, planner.consumer), expect=PlannerState)
    assert state.planner == planner.consumer and state.pending == {} and state.held_jobs == 0
    published = [decode(f[b"m"]) for _, f in r.xrange(k.telemetry)]
    assert any(getattr(e, "event", "") == "planner.state" for e in published)
    assert check(r, settings, "planner")[0] is True
    runner, app = cli
    res = runner.invoke(app, ["health", "--planner"])
    assert res.exit_code == 0 and res.output.startswith(f"ok: planner {planner.consumer}")


def test_a_stopped_planner_leaves_the_hash(settings: Settings, r: redis.Redis[bytes]) -> None:
    p = Planner(settings, PlannerConfig())
    stop = threading.Event()
    t = threading.Thread(target=p.run, args=(stop,), daemon=True)
    t.start()
    k = Keys(settings.namespace)
    deadline = time.monotonic() + 10
    while not r.hexists(k.planners, p.consumer) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert r.hexists(k.planners, p.consumer)
    stop.set()
    t.join(10)
    assert not r.hexists(k.planners, p.consumer)
    assert check(r, settings, "planner")[0] is False


def test_workers_of_this_host_by_default_or_by_name(r: redis.Redis[bytes], settings: Settings,
                                                    cli: tuple[CliRunner, typer.Typer]) -> None:
    runner, app = cli
    res = runner.invoke(app, ["health", "--worker"])
    assert res.exit_code == 1 and "unhealthy: no worker of host" in res.output
    beat(r, settings, f"cpu-{host_names()[-1]}-12-abcdef")
    beat(r, settings, "elsewhere-1", age_s=0.0)
    beat(r, settings, "stale-1", age_s=60.0)
    assert runner.invoke(app, ["health", "--worker"]).exit_code == 0
    assert runner.invoke(app, ["health", "--worker", "--name", "elsewhere"]).exit_code == 0
    res = runner.invoke(app, ["health", "--worker", "--name", "stale"])
    assert res.exit_code == 1 and "named stale*" in res.output


def test_health_needs_one_kind(cli: tuple[CliRunner, typer.Typer]) -> None:
    runner, app = cli
    assert runner.invoke(app, ["health"]).exit_code == 2
    assert runner.invoke(app, ["health", "--planner", "--worker"]).exit_code == 2
