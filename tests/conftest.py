"""Session fixtures: one real Redis-compatible server per test session, a fresh namespace per test,
a stand-in planner for the SDK and load-generator tests, and ``alive`` for tests of processes.

``ADASERVE_TEST_REDIS_URL`` points the suite at an existing server instead (each test still gets
its own namespace, and its keys are deleted afterwards).
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from adaserve.broker import PLANNER_GROUP, Ending, Finalizer, InvalidMessage, Keys, Settings, connect, load_settings
from adaserve.broker.codec import decode, peek
from adaserve.broker.messages import Job, Request, Result, Timings
from adaserve.broker.streams import ensure_group, read_group
from adaserve.embedded import EmbeddedServer


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = os.environ.get("ADASERVE_TEST_REDIS_URL")
    if url:
        yield url
        return
    server = EmbeddedServer(tmp_path_factory.mktemp("valkey"), persist=False).start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def settings(redis_url: str, tmp_path: Path) -> Settings:
    ns = "t" + uuid.uuid4().hex[:12]
    return load_settings(redis_url=redis_url, namespace=ns, data_dir=tmp_path / "data",
                         heartbeat_s=0.2, worker_ttl_s=1.5, reclaim_idle_ms=1000, block_ms=50)


@pytest.fixture
def r(settings: Settings) -> Iterator[redis.Redis[bytes]]:
    client = connect(settings)
    yield client
    pattern = "{" + settings.namespace + "}:*"
    keys = list(client.scan_iter(match=pattern, count=1000))
    if keys:
        client.delete(*keys)
    client.close()


# A stand-in planner: a real peer on the real server that ends each request through the
# ``Finalizer``, so the SDK and the load generator are tested against the true reply path.

Respond = Callable[[Job, Request], tuple[str, int | None]]


def first_value(job: Job, req: Request) -> tuple[str, int | None]:
    """Complete every request, predicting the first element of its first input."""
    arr = next(iter(req.inputs.values())).to_numpy()
    return "completed", int(arr.reshape(-1)[0])


class StandIn:
    def __init__(self, settings: Settings, respond: Respond = first_value) -> None:
        self.settings = settings
        self.respond = respond
        self.keys = Keys(settings.namespace)
        self.r = connect(settings)
        self.fin = Finalizer(self.r, settings)
        self.seen: list[str] = []
        self._stop = threading.Event()
        ensure_group(self.r, self.keys.jobs, PLANNER_GROUP)
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> StandIn:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.r.close()

    def _loop(self) -> None:
        while not self._stop.is_set():
            for e in read_group(self.r, [self.keys.jobs], PLANNER_GROUP, "standin", block_ms=20):
                self._serve(e.id, e.ms, e.raw or b"")

    def _serve(self, entry_id: str, ms: int, raw: bytes) -> None:
        ack = (self.keys.jobs, PLANNER_GROUP, entry_id)
        now = time.time() * 1000
        timings = Timings(submitted_ms=ms, finished_ms=now, total_ms=max(0.0, now - ms))
        try:
            job = decode(raw, expect=Job)
        except InvalidMessage as exc:
            p = peek(raw)
            res = Result(job_id=p.get("id", ""), request_id="", status="rejected", reason=exc.reason, timings=timings)
            self.fin.end([Ending(res, p.get("reply_to", "x"))], ack=ack)
            return
        self.seen.append(job.id)
        self.fin.register(job, entry_id, ms)
        endings = []
        for req in job.requests:
            status, pred = self.respond(job, req)
            if status == "silent":
                continue
            endings.append(Ending(Result(job_id=job.id, request_id=req.id, app=job.app, model=job.model,
                                         status=status, prediction=pred, timings=timings), job.reply_to))
        self.fin.end(endings, ack=ack)


@pytest.fixture
def standin(settings: Settings, r: object) -> Iterator[Callable[..., StandIn]]:
    made: list[StandIn] = []

    def make(respond: Respond = first_value) -> StandIn:
        s = StandIn(settings, respond).start()
        made.append(s)
        return s

    yield make
    for s in made:
        s.stop()


@pytest.fixture
def acl_user(settings: Settings, r: redis.Redis[bytes]) -> Iterator[Callable[..., Settings]]:
    """``acl_user("producer")``: the test's settings, connecting as a new ACL user of that role
    (``adaserve.broker.acl``) with a unique name; the users are deleted after the test."""
    from urllib.parse import urlsplit, urlunsplit

    from adaserve.broker.acl import role

    made: list[str] = []

    def make(role_name: str, client_prefix: str | None = None) -> Settings:
        name = f"{settings.namespace}-{role_name}-{uuid.uuid4().hex[:6]}"
        password = uuid.uuid4().hex
        user = role(settings.namespace, role_name, password=password, user=name, client_prefix=client_prefix)
        r.execute_command("ACL", "SETUSER", name, *user.rules())
        made.append(name)
        u = urlsplit(settings.redis_url)
        url = urlunsplit((u.scheme, f"{name}:{password}@{u.hostname}:{u.port}", u.path, u.query, u.fragment))
        return load_settings(**{**settings.model_dump(), "redis_url": url})

    yield make
    if made:
        r.execute_command("ACL", "DELUSER", *made)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a child that exited but was not yet reaped by a parent that died is a zombie: gone
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:  # reaped in between
        return False


@pytest.fixture
def alive() -> Callable[[int], bool]:
    """Whether a process id names a live process (not a zombie), for tests that stop processes."""
    return _pid_alive
