"""A planner that has fallen behind: what it reads too late, or refuses for load, costs it little
(real server; the planner stepped by hand)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import msgpack
import numpy as np
import pytest
import redis

from adaserve.broker import Job, Keys, Request, Result, Settings, Slo, Tensor, decode, encode, streams
from adaserve.broker.codec import unpack
from adaserve.broker.events import WorkerHeartbeat
from adaserve.broker.replies import read_reply
from adaserve.planner.config import PlannerConfig
from adaserve.planner.core import Pending, Scheduler
from adaserve.planner.dispatch import expiries
from adaserve.planner.edf import EdfScheduler
from adaserve.planner.service import Planner
from adaserve.planner.state import HeldJob

SPEC = {"m": {"x": {"shape": [2], "dtype": "float32"}}}


def _job(jid: str, n: int, deadline_ms: float = 2000, shape: tuple[int, ...] = (2,)) -> Job:
    reqs = [Request(id=f"r{i}", inputs={"x": Tensor.from_numpy(np.full(shape, i, np.float32))}) for i in range(n)]
    return Job(id=jid, model="m", requests=reqs, slo=Slo(deadline_ms=deadline_ms), reply_to="client")


class Counting(EdfScheduler):
    """EDF that counts the requests it was given."""

    added = 0

    def add(self, item: Pending, now: float) -> None:
        Counting.added += 1
        super().add(item, now)


@pytest.fixture
def planner(settings: Settings, r: redis.Redis[bytes], request: pytest.FixtureRequest) -> Iterator[Planner]:
    # no free slot: what is admitted stays queued
    hb = WorkerHeartbeat(ts=time.time() * 1000, worker="peer", pool="cpu", slots=0, models=["m"], inputs=SPEC)
    r.hset(Keys(settings.namespace).workers, "peer", msgpack.packb(hb.model_dump()))
    Counting.added = 0

    def factory(model: str, profile: object) -> Scheduler:
        return Counting()
    p = Planner(settings, PlannerConfig(max_batch=8, max_queue=getattr(request, "param", 0)), factory=factory)
    p.start()
    p.step()  # learns the pool
    yield p
    p.close()


def _replies(r: redis.Redis[bytes], k: Keys) -> list[bytes]:
    return [e.raw for e in streams.read(r, {k.reply("client"): "0"}, count=100) if e.raw is not None]


def test_a_job_read_after_its_deadline_expires_without_entering_the_policy(
    planner: Planner, r: redis.Redis[bytes], settings: Settings,
) -> None:
    k = Keys(settings.namespace)
    streams.publish(r, k.jobs, encode(_job("late", 3, deadline_ms=1)))
    streams.publish(r, k.jobs, encode(_job("fine", 2)))
    time.sleep(0.01)
    planner.step()
    assert Counting.added == 2  # only the job that can still finish
    results = [x for raw in _replies(r, k) for x in read_reply(raw)]
    assert sorted((x.request_id, x.status) for x in results if x.job_id == "late") == [
        ("r0", "expired"), ("r1", "expired"), ("r2", "expired")]
    assert {x.reason for x in results} == {"deadline: cannot finish in time"}
    events = [decode(x.raw) for x in streams.read(r, {k.telemetry: "0"}, count=1000)]
    done = [e for e in events if e.type == "event" and e.event == "job.completed"]
    assert [(e.job_id, e.requests, e.expired) for e in done] == [("late", 3, 3)]  # accounted as before
    assert len(planner.held) == 1 and "fine" in planner.held


@pytest.mark.parametrize("planner", [4], indirect=True)
def test_a_job_refused_for_load_is_refused_before_validation_with_one_reply_entry(
    planner: Planner, r: redis.Redis[bytes], settings: Settings,
) -> None:
    k = Keys(settings.namespace)
    streams.publish(r, k.jobs, encode(_job("first", 4)))
    planner.step()  # the model's scheduler exists now, holding 4 requests: the bound is reached
    streams.publish(r, k.jobs, encode(_job("wrong", 3, shape=(5,))))  # a shape the model does not take
    streams.publish(r, k.jobs, encode(_job("over", 3)))
    planner.step()
    raws = _replies(r, k)
    assert len(raws) == 2  # one entry per refused job, not one per request
    results = [x for raw in raws for x in read_reply(raw)]
    assert sorted((x.job_id, x.request_id) for x in results) == [
        ("over", "r0"), ("over", "r1"), ("over", "r2"), ("wrong", "r0"), ("wrong", "r1"), ("wrong", "r2")]
    assert {x.status for x in results} == {"rejected"}
    assert {x.reason for x in results} == {"overloaded: 4 requests queued for m, the bound is 4"}
    assert r.xlen(k.dead) == 0
    assert r.xpending(k.jobs, "planners")["pending"] == 1  # only the held job's entry


def test_expiries_validate_as_the_results_they_stand_for() -> None:
    """The packed maps are built from one validated ``Result`` per job: each must be what
    validating that request's own result gives."""
    jobs = [_job("a", 3), _job("b", 1)]
    items = [Pending(j.id, rq.id, "app", "m", 1.0, 2.0, 0, (HeldJob(j, "1-0", 1000.0, len(j.requests)), rq))
             for j in jobs for rq in j.requests]
    packed, by_job = expiries(items, 1500.0, "deadline: cannot finish in time")
    assert [(p.job_id, p.request_id, p.status, p.reply_to) for p in packed] == [
        ("a", "r0", "expired", "client"), ("a", "r1", "expired", "client"), ("a", "r2", "expired", "client"),
        ("b", "r0", "expired", "client")]
    assert {j: [p.request_id for p in ps] for j, ps in by_job.items()} == {"a": ["r0", "r1", "r2"], "b": ["r0"]}
    for p in packed:
        got = Result.model_validate(unpack(p.encoded()))
        want = Result(job_id=p.job_id, request_id=p.request_id, app="app", model="m", status="expired",
                      reason="deadline: cannot finish in time",
                      timings={"submitted_ms": 1000.0, "finished_ms": 1500.0, "total_ms": 500.0})
        assert got == want
