"""ACL roles on real servers: what each role's credential may do, and every denial the roles
promise (NOPERM from the server, not a check of our own)."""

from __future__ import annotations

import json
import shlex
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import redis
import typer
from typer.testing import CliRunner

from adaserve.broker import ConfigError, Keys, Settings, connect
from adaserve.broker.acl import ROLES, role
from adaserve.broker.cli import acl_lines
from adaserve.broker.codec import encode
from adaserve.broker.events import JobAccepted
from adaserve.embedded import free_port
from adaserve.producers import Client, make_job
from adaserve.workers.rerun import record

MakeUser = Callable[..., Settings]


def denied(fn: Callable[[], object]) -> bool:
    try:
        fn()
    except redis.exceptions.NoPermissionError:
        return True
    return False


# -- the rules themselves ---------------------------------------------------------------------

def test_a_producer_may_write_jobs_and_use_only_its_prefix_of_reply_streams() -> None:
    u = role("prod", "producer", password="s3cret", client_prefix="app1")
    assert u.name == "prod-producer"
    assert u.keys == ("~{prod}:reply:app1-*",) and u.selectors == ("(%W~{prod}:jobs +xadd)",)
    assert {"+xread", "+xtrim", "+del"} <= set(u.rules())
    assert "s3cret" not in u.acl_file_line() + repr(u)
    assert u.acl_file_line().startswith("user prod-producer reset on #")
    assert u.setuser_command().startswith("ACL SETUSER prod-producer reset on #")
    # without a prefix, the user name is the prefix (the SDK's default with a user in the URL)
    assert role("prod", "producer", password="pw").keys == ("~{prod}:reply:prod-producer-*",)


@pytest.mark.parametrize("kwargs, message", [
    ({"namespace": "a*", "role": "reader"}, "namespace"),
    ({"namespace": "ada", "role": "admin"}, "unknown role"),
    ({"namespace": "ada", "role": "producer", "client_prefix": "app*"}, "client prefix"),
    ({"namespace": "ada", "role": "producer", "user": "a b"}, "user name"),
    ({"namespace": "ada", "role": "producer", "password": ""}, "password"),
])
def test_bad_names_are_config_errors(kwargs: dict[str, str], message: str) -> None:
    args = {"password": "pw", **kwargs}
    with pytest.raises(ConfigError, match=message):
        role(args.pop("namespace"), args.pop("role"), **args)


# -- producer ---------------------------------------------------------------------------------

def test_a_producer_submits_and_reads_its_replies_but_nothing_else(
    settings: Settings, r: redis.Redis[bytes], standin: Callable[..., object], acl_user: MakeUser,
) -> None:
    standin()
    prod = acl_user("producer", client_prefix="app1")
    k = Keys(settings.namespace)
    r.xadd(k.reply("app2-other"), {b"m": b"someone else's result"})
    with Client(prod, client_id="app1-" + uuid.uuid4().hex[:8]) as c:
        res = c.submit(make_job("m", [np.array([7.0], np.float32)], 5000.0)).result(10)
        assert res.predictions == [7]
    pr = connect(prod)
    try:
        assert pr.xadd(k.jobs, {b"m": b"x"})  # it may write jobs ...
        assert denied(lambda: pr.xrange(k.jobs))  # ... never read them, trim or delete them
        assert denied(lambda: pr.xtrim(k.jobs, maxlen=0))
        assert denied(lambda: pr.delete(k.jobs))
        assert denied(lambda: pr.xread({k.batches("cpu"): "0"}))
        assert denied(lambda: pr.xread({k.reply("app2-other"): "0"}))
        assert denied(lambda: pr.xread({k.reply("app10-x"): "0"}))  # a longer prefix is another client
        assert denied(lambda: pr.xadd(k.telemetry, {b"m": b"x"}))
        assert denied(lambda: pr.xadd(k.dead, {b"m": b"x"}))
        assert denied(lambda: pr.hset(k.job("j"), "remaining", 0))
    finally:
        pr.close()


def test_a_client_gets_its_id_from_the_producers_user(
    settings: Settings, r: redis.Redis[bytes], standin: Callable[..., object], acl_user: MakeUser,
) -> None:
    """No prefix anywhere: the rules grant ``reply:<user>-*`` and the SDK names itself so."""
    standin()
    prod = acl_user("producer")
    with Client(prod) as c:
        assert c.client_id.startswith(prod.redis_url.split("//")[1].split(":")[0] + "-")
        assert c.submit(make_job("m", [np.array([3.0], np.float32)], 5000.0)).result(10).predictions == [3]


# -- worker, reader, profiler -------------------------------------------------------------------

def test_a_worker_cannot_read_or_write_the_ingress_stream(
    settings: Settings, r: redis.Redis[bytes], acl_user: MakeUser,
) -> None:
    k = Keys(settings.namespace)
    r.xadd(k.jobs, {b"m": b"a job"})
    r.xgroup_create(k.jobs, "planners", id="0")
    w = connect(acl_user("worker"))
    try:
        assert denied(lambda: w.xreadgroup("planners", "w", {k.jobs: ">"}, count=1))
        assert denied(lambda: w.xread({k.jobs: "0"}))
        assert denied(lambda: w.xadd(k.jobs, {b"m": b"x"}))
        assert denied(lambda: w.get(k.profile("m")))
        assert w.xgroup_create(k.batches("cpu"), "cpu", id="0", mkstream=True)
        # its idle re-runs append to ORLOJ's samples, which only the planner reads
        record(w, settings.namespace, "m", "chat", 0.002)
        assert [(s["app"], s["exec_s"]) for s in map(json.loads, r.lrange(k.orloj_samples("m"), 0, -1))] == [
            ("chat", 0.002)]
        assert denied(lambda: w.lrange(k.orloj_samples("m"), 0, -1))
    finally:
        w.close()


@pytest.fixture
def reader_cli(settings: Settings, r: redis.Redis[bytes], acl_user: MakeUser,
               monkeypatch: pytest.MonkeyPatch) -> tuple[CliRunner, typer.Typer, Settings]:
    from adaserve.telemetry.cli import register as register_telemetry

    reader = acl_user("reader")
    monkeypatch.setenv("ADASERVE_REDIS_URL", reader.redis_url)
    monkeypatch.setenv("ADASERVE_NAMESPACE", settings.namespace)
    app = typer.Typer()
    register_telemetry(app)
    return CliRunner(), app, reader


def test_a_reader_runs_stats_tail_dead_top_and_the_exporter_and_writes_nothing(
    settings: Settings, r: redis.Redis[bytes], reader_cli: tuple[CliRunner, typer.Typer, Settings],
) -> None:
    from adaserve.telemetry.scrape import LiveCollector

    runner, app, reader = reader_cli
    k = Keys(settings.namespace)
    r.xadd(k.telemetry, {b"m": encode(JobAccepted(ts=time.time() * 1000, job_id="j1", app="a", model="m",
                                                   requests=2, deadline_ms=100))})
    r.xadd(k.dead, {b"reason": b"schema", b"detail": b"bad", b"source": k.jobs.encode(), b"entry": b"1-0",
                    b"ts": b"0", b"raw": b"x"})
    r.xadd(k.jobs, {b"m": b"a job"})
    r.xgroup_create(k.jobs, "planners", id="0")
    r.acl_log_reset()
    out = runner.invoke(app, ["stats", "--window", "5m", "--json"])
    assert out.exit_code == 0 and json.loads(out.output)["events"] == 1, out.output
    out = runner.invoke(app, ["tail", "--no-follow", "--json"])
    assert out.exit_code == 0 and "job.accepted" in out.output, out.output
    out = runner.invoke(app, ["dead"])
    assert out.exit_code == 0 and "schema" in out.output, out.output
    out = runner.invoke(app, ["top", "--once", "--json"])
    assert out.exit_code == 0, out.output
    rr = connect(reader)
    try:
        metrics = {m.name: m for m in LiveCollector(rr, reader).collect()}
        assert metrics["adaserve_broker_up"].samples[0].value == 1
        assert metrics["adaserve_dead_letters"].samples[0].value == 1
        # the exporter and top may look at the groups of the jobs and batches, never at their entries
        assert rr.xinfo_groups(k.jobs)[0]["lag"] == 1
        assert denied(lambda: rr.xrange(k.jobs))
        assert denied(lambda: rr.xread({k.batches("cpu"): "0"}))
        assert denied(lambda: rr.xreadgroup("planners", "spy", {k.jobs: ">"}))
        assert denied(lambda: rr.xadd(k.telemetry, {b"m": b"x"}))
        assert denied(lambda: rr.xtrim(k.telemetry, maxlen=0))
        assert denied(lambda: rr.delete(k.dead))
        assert denied(lambda: rr.hset(k.workers, "w", b"x"))
        assert denied(lambda: rr.xread({k.reply("c-1"): "0"}))
        refused = {str(e["object"]) for e in r.acl_log()}
        assert refused == {"xreadgroup", "xadd", "xtrim", "del", "hset", k.jobs, k.batches("cpu"), k.reply("c-1")}, refused
    finally:
        rr.close()


def test_a_profiler_keeps_profiles_and_rq_keys_and_stays_out_of_the_pipeline(
    settings: Settings, r: redis.Redis[bytes], acl_user: MakeUser,
) -> None:
    from adaserve.profiling.jobs import enqueue, queue, run_worker
    from adaserve.profiling.measure import MeasureConfig

    k = Keys(settings.namespace)
    prof = acl_user("profiler")
    p = connect(prof)
    try:
        p.set(k.profile("m"), b"{}")
        p.rpush(k.orloj_samples("m"), b"{}")
        r.xadd(k.batches("cpu"), {b"m": b"batch"})
        assert len(p.xrange(k.batches("cpu"))) == 1  # a re-run reads its request's batch
        for deny in (lambda: p.xadd(k.batches("cpu"), {b"m": b"x"}), lambda: p.xread({k.jobs: "0"}),
                     lambda: p.xadd(k.telemetry, {b"m": b"x"}), lambda: p.xread({k.reply("c-1"): "0"}),
                     lambda: p.hgetall(k.workers), lambda: p.flushdb(), lambda: p.keys("*")):
            assert denied(deny)
        # rq itself under the role: a job enqueued and run to its end by a real rq worker
        (job,) = enqueue(prof, [("no-such-model", "default")], "cpu", MeasureConfig())
        assert run_worker(prof, burst=True, fork=False)
        job.refresh()
        assert job.get_status().value == "failed"
        assert "no-such-model" in (job.latest_result().exc_string or "")
    finally:
        p.close()
        # rq's own keys are not under the namespace's prefix: remove this test's jobs and queue.
        q = queue(settings, r)
        for registry in (q.finished_job_registry, q.failed_job_registry):
            for job_id in registry.get_job_ids():
                r.delete(f"rq:job:{job_id}", f"rq:results:{job_id}")
            r.delete(registry.key)
        q.delete(delete_jobs=True)


def test_a_command_run_with_another_roles_user_ends_in_one_line(
    settings: Settings, acl_user: MakeUser, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from adaserve.cli import app

    monkeypatch.setenv("ADASERVE_REDIS_URL", acl_user("producer").redis_url)
    monkeypatch.setenv("ADASERVE_NAMESPACE", settings.namespace)
    out = CliRunner().invoke(app, ["tail", "--no-follow"])
    assert out.exit_code == 2
    assert out.stdout == "" and len(out.stderr.strip().splitlines()) == 1, out.output
    assert "refused a command to this user" in out.stderr and "adaserve acl" in out.stderr


# -- the CLI and the rules on other servers ---------------------------------------------------------

def test_the_cli_prints_commands_that_redis_accepts_and_enforces(
    settings: Settings, r: redis.Redis[bytes], monkeypatch: pytest.MonkeyPatch,
) -> None:
    from adaserve.cli import app

    name = f"{settings.namespace}-p"
    monkeypatch.setenv("ADASERVE_NAMESPACE", settings.namespace)
    out = CliRunner().invoke(app, ["acl", "producer", "--format", "commands", "--user", name,
                                   "--password", "s3cret", "--client-prefix", "app1"])
    assert out.exit_code == 0, out.output
    (line,) = out.output.strip().splitlines()
    assert "s3cret" not in line
    try:
        assert r.execute_command(*shlex.split(line)) in (b"OK", "OK")
        p = redis.Redis.from_url(settings.redis_url.replace("redis://", f"redis://{name}:s3cret@"))
        k = Keys(settings.namespace)
        assert p.xadd(k.jobs, {b"m": b"x"})
        assert denied(lambda: p.xread({k.batches("cpu"): "0"}))
        p.close()
    finally:
        r.execute_command("ACL", "DELUSER", name)
    every = CliRunner().invoke(app, ["acl"])
    assert every.exit_code == 0
    assert [ln.split()[1] for ln in every.stdout.splitlines()] == [f"{settings.namespace}-{x}" for x in ROLES]
    assert every.stderr.count("password of ") == len(ROLES)
    bad = CliRunner().invoke(app, ["acl", "--password", "x"])
    assert bad.exit_code != 0


def test_every_role_loads_from_an_acl_file_on_redis_7_0(tmp_path: Path) -> None:
    """Debian's redis-server 7.0: the oldest server with the key selectors (%R~, %W~) the roles use."""
    binary = "/usr/bin/redis-server"
    if not Path(binary).exists():
        pytest.skip("no redis-server binary (Debian's redis-server 7.0 package) on this host")
    lines, made = acl_lines("ada", [], fmt="acl-file")
    (tmp_path / "users.acl").write_text("user default on nopass ~* &* +@all\n" + "\n".join(lines) + "\n")
    port = free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(tmp_path), "--aclfile", str(tmp_path / "users.acl")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        admin = _wait(redis.Redis(port=port))
        assert {f"ada-{x}" for x in ROLES} <= {str(u) for u in admin.acl_users()}
        prod = redis.Redis(port=port, username="ada-producer", password=made["ada-producer"])
        assert prod.xadd("{ada}:jobs", {b"m": b"x"})
        assert prod.xread({"{ada}:reply:ada-producer-1": "0"}) in ([], {})
        assert denied(lambda: prod.xread({"{ada}:batches:cpu": "0"}))
        assert denied(lambda: prod.xadd("{ada}:telemetry", {b"m": b"x"}))
        worker = redis.Redis(port=port, username="ada-worker", password=made["ada-worker"])
        assert denied(lambda: worker.xread({"{ada}:jobs": "0"}))
        prod.close()
        worker.close()
        admin.close()
    finally:
        proc.terminate()
        proc.wait(10)


def _wait(client: redis.Redis[bytes], timeout_s: float = 10.0) -> redis.Redis[bytes]:
    end = time.monotonic() + timeout_s
    while True:
        try:
            client.ping()
            return client
        except redis.ConnectionError:
            if time.monotonic() > end:
                raise
            time.sleep(0.05)


@pytest.fixture(autouse=True)
def _no_leftover_users(r: redis.Redis[bytes], settings: Settings) -> Iterator[None]:
    yield
    left = [u for u in r.acl_users() if (u.decode() if isinstance(u, bytes) else u).startswith(settings.namespace)]
    assert not left, f"users left behind: {left}"
