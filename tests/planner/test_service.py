"""The live planner against a real server, with an in-test worker peer that speaks the wire contract."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import msgpack
import numpy as np
import pytest
import redis

from adaserve.broker import (
    Batch,
    Ending,
    Finalizer,
    Job,
    Keys,
    Request,
    Result,
    Settings,
    Slo,
    Tensor,
    Timings,
    decode,
    encode,
    streams,
)
from adaserve.broker.events import BatchFinished, RequestTiming, WorkerHeartbeat
from adaserve.broker.replies import read_reply
from adaserve.planner.config import PlannerConfig
from adaserve.planner.service import Planner

SPEC = {"m": {"x": {"shape": [2], "dtype": "float32"}}}


class PeerWorker(threading.Thread):
    """Sums its input as the 'prediction'; heartbeats like a real worker."""

    def __init__(self, settings: Settings, r: redis.Redis[bytes], slots: int = 2) -> None:
        super().__init__(daemon=True)
        self.s, self.r, self.k, self.slots = settings, r, Keys(settings.namespace), slots
        self.fin = Finalizer(r, settings)
        self.stop = threading.Event()
        self.batches: list[Batch] = []

    def beat(self) -> None:
        hb = WorkerHeartbeat(ts=time.time() * 1000, worker="peer", pool="cpu", slots=self.slots, models=["m"],
                             inputs=SPEC)
        raw = msgpack.packb(hb.model_dump())
        self.r.hset(self.k.workers, "peer", raw)
        self.r.xadd(self.k.telemetry, {b"m": raw})

    def run(self) -> None:
        stream = self.k.batches("cpu")
        streams.ensure_group(self.r, stream, "cpu")
        last = 0.0
        while not self.stop.is_set():
            if time.time() - last > 0.2:
                self.beat()
                last = time.time()
            for e in streams.read_group(self.r, [stream], "cpu", "peer", count=1, block_ms=20):
                b = decode(e.raw, expect=Batch)
                self.batches.append(b)
                now = time.time() * 1000
                ends = [Ending(Result(job_id=i.job_id, request_id=i.request_id, status="completed",
                                      prediction=int(i.inputs["x"].to_numpy().sum()),
                                      timings=Timings(submitted_ms=i.submitted_ms, finished_ms=now,
                                                      total_ms=now - i.submitted_ms)), i.reply_to) for i in b.items]
                ev = BatchFinished(ts=now, batch_id=b.id, pool="cpu", worker="peer", model=b.model, size=len(b.items),
                                   exec_ms=0.5, items=[RequestTiming(job_id=i.job_id, request_id=i.request_id, app=i.app,
                                                                     status="completed", queue_ms=0, exec_ms=0.5, total_ms=1)
                                                       for i in b.items])
                self.fin.end(ends, ack=(stream, "cpu", e.id), event=encode(ev))


@pytest.fixture
def pipeline(settings: Settings, r: redis.Redis[bytes]) -> Iterator[PeerWorker]:
    peer = PeerWorker(settings, r)
    peer.beat()
    peer.start()
    planner = Planner(settings, PlannerConfig(max_batch=8))
    stop = threading.Event()
    t = threading.Thread(target=planner.run, args=(stop,), daemon=True)
    t.start()
    yield peer
    stop.set()
    peer.stop.set()
    t.join(5)
    peer.join(5)


def _job(jid: str, n: int = 1, deadline_ms: float = 2000, model: str = "m", shape: tuple[int, ...] = (2,)) -> Job:
    reqs = [Request(id=f"r{i}", inputs={"x": Tensor.from_numpy(np.full(shape, i, np.float32))}) for i in range(n)]
    return Job(id=jid, model=model, requests=reqs, slo=Slo(deadline_ms=deadline_ms), reply_to="client")


def _collect(r: redis.Redis[bytes], k: Keys, want: int, timeout: float = 10.0) -> list[Result]:
    out: list[Result] = []
    last = "0"
    end = time.time() + timeout
    while len(out) < want and time.time() < end:
        for e in streams.read(r, {k.reply("client"): last}, block_ms=100):
            last = e.id
            out += read_reply(e.raw)
    return out


def test_jobs_are_batched_served_and_acked(pipeline: PeerWorker, r: redis.Redis[bytes], settings: Settings) -> None:
    k = Keys(settings.namespace)
    for j in range(5):
        streams.publish(r, k.jobs, encode(_job(f"j{j}", n=4)))
    results = _collect(r, k, 20)
    assert len(results) == 20 and {x.status for x in results} == {"completed"}
    assert {(x.request_id, x.prediction) for x in results} == {(f"r{i}", 2 * i) for i in range(4)}
    assert max(len(b.items) for b in pipeline.batches) > 1  # requests of several jobs share batches
    assert all(len(b.items) <= 8 for b in pipeline.batches)
    time.sleep(0.3)
    assert r.xpending(k.jobs, "planners")["pending"] == 0
    assert r.xlen(k.jobs) == 0  # done with: deleted with their acks, not left to the trim


def test_bad_input_is_rejected_and_dead_lettered_while_good_traffic_flows(
    pipeline: PeerWorker, r: redis.Redis[bytes], settings: Settings,
) -> None:
    k = Keys(settings.namespace)
    streams.publish(r, k.jobs, b"\xc1 not msgpack")
    r.xadd(k.jobs, {b"other": b"field"})
    streams.publish(r, k.jobs, encode(_job("unknown", model="nope")))
    streams.publish(r, k.jobs, encode(_job("shape", shape=(3,))))
    bad = _job("schema").model_dump()
    bad["slo"] = {"deadline_ms": "soon"}
    streams.publish(r, k.jobs, msgpack.packb(bad))
    streams.publish(r, k.jobs, encode(_job("good", n=2)))
    streams.publish(r, k.jobs, encode(_job("good", n=2)))  # the same bytes again: a producer's retry, dropped
    streams.publish(r, k.jobs, encode(_job("good", n=3)))  # the same id for other content: rejected
    results = _collect(r, k, 8, timeout=3.0)
    by_job = {(x.job_id, x.status) for x in results}
    assert {("good", "completed"), ("unknown", "rejected"), ("shape", "rejected"), ("schema", "rejected")} <= by_job
    good = [x for x in results if x.job_id == "good"]
    assert sorted((x.request_id, x.status) for x in good) == [
        ("r0", "completed"), ("r0", "rejected"), ("r1", "completed"), ("r1", "rejected"), ("r2", "rejected")]
    reasons = {x.job_id: x.reason for x in results if x.status == "rejected"}
    assert reasons["unknown"].startswith("unknown_model") and "shape" in reasons["shape"]
    time.sleep(0.3)
    dead = [f[b"reason"].decode() for _, f in r.xrange(k.dead)]
    assert sorted(dead) == sorted(["undecodable", "undecodable", "unknown_model", "schema", "schema", "duplicate"])
    assert r.xpending(k.jobs, "planners")["pending"] == 0


def test_infeasible_deadlines_expire_and_accounting_adds_up(
    pipeline: PeerWorker, r: redis.Redis[bytes], settings: Settings,
) -> None:
    k = Keys(settings.namespace)
    streams.publish(r, k.jobs, encode(_job("late", n=3, deadline_ms=1)))
    streams.publish(r, k.jobs, encode(_job("fine", n=3)))
    results = _collect(r, k, 6)
    assert sorted((x.job_id, x.status) for x in results) == [("fine", "completed")] * 3 + [("late", "expired")] * 3
    time.sleep(0.3)
    done = [e for e in (decode(x.raw) for x in streams.read(r, {k.telemetry: "0"}, count=10_000)) if e.event == "job.completed"]
    totals = {d.job_id: (d.requests, d.completed, d.expired) for d in done}
    assert totals == {"late": (3, 0, 3), "fine": (3, 3, 0)}


def test_a_step_ends_all_its_expiries_with_one_script_call_before_their_acks(
    r: redis.Redis[bytes], settings: Settings,
) -> None:
    """Expiries of two models in one step: one finaliser call on the step's round trip (each
    expiry cost two round trips before, and a planner behind expired more and fell further behind)."""
    k = Keys(settings.namespace)
    two = {"m": SPEC["m"], "m2": SPEC["m"]}
    hb = WorkerHeartbeat(ts=time.time() * 1000, worker="peer", pool="cpu", slots=2, models=["m", "m2"], inputs=two)
    r.hset(k.workers, "peer", msgpack.packb(hb.model_dump()))
    planner = Planner(settings, PlannerConfig(max_batch=8))
    planner.start()
    try:
        planner.step()  # learns the pool
        streams.publish(r, k.jobs, encode(_job("a", n=2, deadline_ms=1)))
        streams.publish(r, k.jobs, encode(_job("b", n=3, deadline_ms=1, model="m2")))
        time.sleep(0.01)
        calls = lambda: sum(r.info("commandstats").get(f"cmdstat_{c}", {}).get("calls", 0)  # noqa: E731
                            for c in ("eval", "evalsha"))
        before = calls()
        planner.step()
        assert calls() - before == 3  # the two jobs' registrations, then one end for both
        results = _collect(r, k, 5)
        assert sorted((x.job_id, x.status) for x in results) == [("a", "expired")] * 2 + [("b", "expired")] * 3
        assert r.xpending(k.jobs, "planners")["pending"] == 0
        events = [decode(x.raw) for x in streams.read(r, {k.telemetry: "0"}, count=1000)]
        names = [(e.event, getattr(e, "job_id", None)) for e in events if e.type == "event"]
        for job in ("a", "b"):  # accepted, then ended by the script, then the planner's expiry event
            assert names.index(("job.accepted", job)) < names.index(("job.completed", job)) \
                < names.index(("job.expired", job))
    finally:
        planner.close()


def test_modality_policy_is_checked_and_chooses_mosel_only_for_models_with_subsets(settings: Settings) -> None:
    from adaserve.broker.errors import ConfigError
    from adaserve.planner.config import default_factory
    from adaserve.planner.mosel.scheduler import MoselScheduler

    with pytest.raises(ConfigError, match="modality"):
        PlannerConfig(modality="fastest")
    make = default_factory("edf", "aggressive", settings)
    av = make("av-digits", None)  # the profile shipped with adaserve
    try:
        assert isinstance(av, MoselScheduler) and av.policy == "aggressive"
    finally:
        av.close()
    assert make("m", None).name != "mosel"
    assert default_factory("edf")("av-digits", None).name != "mosel"  # no settings: no profile lookup


def test_a_job_past_the_queue_bound_is_refused_overloaded_without_a_dead_letter(
    settings: Settings, r: redis.Redis[bytes],
) -> None:
    peer = PeerWorker(settings, r)
    peer.beat()
    peer.start()
    planner = Planner(settings, PlannerConfig(max_batch=8, max_queue=6))
    stop = threading.Event()
    t = threading.Thread(target=planner.run, args=(stop,), daemon=True)
    t.start()
    try:
        k = Keys(settings.namespace)
        streams.publish(r, k.jobs, encode(_job("big", n=8)))
        streams.publish(r, k.jobs, encode(_job("small", n=4)))
        results = _collect(r, k, 12)
    finally:
        stop.set()
        peer.stop.set()
        t.join(5)
        peer.join(5)
    by_job = {(x.job_id, x.status) for x in results}
    assert by_job == {("big", "rejected"), ("small", "completed")} and len(results) == 12
    reason = next(x.reason for x in results if x.job_id == "big")
    assert reason == "overloaded: 0 requests queued for m, the bound is 6"
    assert r.xlen(k.dead) == 0  # a job refused for load was not wrong: nothing to dead-letter


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_nan_and_inf_inputs_are_rejected_at_admission(
    dtype: type, pipeline: PeerWorker, r: redis.Redis[bytes], settings: Settings,
) -> None:
    k = Keys(settings.namespace)
    for jid, value in (("nan", np.nan), ("inf", np.inf), ("ninf", -np.inf)):
        x = np.array([1.0, value], dtype)
        job = Job(id=jid, model="m", slo=Slo(deadline_ms=2000), reply_to="client",
                  requests=[Request(id="r0", inputs={"x": Tensor.from_numpy(x)})])
        streams.publish(r, k.jobs, encode(job))
    streams.publish(r, k.jobs, encode(_job("good")))
    results = _collect(r, k, 4)
    assert {(x.job_id, x.status, x.reason.split(":")[0]) for x in results} == {
        ("nan", "rejected", "non_finite"), ("inf", "rejected", "non_finite"), ("ninf", "rejected", "non_finite"),
        ("good", "completed", "")}
    assert pipeline.batches and all(i.job_id == "good" for b in pipeline.batches for i in b.items)


def test_a_job_naming_more_requests_than_allowed_gets_one_answer_not_a_flood(
    pipeline: PeerWorker, r: redis.Redis[bytes], settings: Settings,
) -> None:
    k = Keys(settings.namespace)
    t = {"dtype": "float32", "shape": [2], "data": np.zeros(2, np.float32).tobytes()}
    body = {"v": 1, "type": "job", "id": "huge", "model": "m", "reply_to": "client", "slo": {"deadline_ms": 1000},
            "requests": [{"id": f"r{i}", "inputs": {"x": t}} for i in range(1500)]}
    streams.publish(r, k.jobs, msgpack.packb(body, use_bin_type=True))
    streams.publish(r, k.jobs, encode(_job("after")))
    results = _collect(r, k, 3, timeout=1.5)  # waits out the time a flood would take to arrive
    huge = [x for x in results if x.job_id == "huge"]
    assert len(huge) == 1 and huge[0].request_id == "" and huge[0].status == "rejected", huge[:3]
    assert [x.status for x in results if x.job_id == "after"] == ["completed"]


def test_a_slow_step_does_not_claim_back_the_entry_it_just_rejected(
    settings: Settings, r: redis.Redis[bytes],
) -> None:
    # A step slower than reclaim_idle_ms (a loaded machine) reaches its reclaim with the
    # rejection's ack still queued: the entry looks idle and was claimed back, rejected twice.
    peer = PeerWorker(settings, r)
    peer.beat()
    s = settings.model_copy(update={"reclaim_idle_ms": 50})
    planner = Planner(s, PlannerConfig(max_batch=8))
    k = Keys(s.namespace)
    planner.start()
    streams.publish(r, k.jobs, encode(_job("unknown", model="nope")))
    planner.pools.refresh(planner.now_ms())
    planner._read_ingress(block_ms=200, read=True)
    time.sleep(0.2)  # the step's own slowness, past reclaim_idle_ms
    planner._next_touch = 0.0
    planner._housekeeping()
    planner._pipe.execute()
    planner._next_touch = 0.0
    planner._housekeeping()
    planner._pipe.execute()
    results = _collect(r, k, 2, timeout=0.5)
    assert [(x.job_id, x.status) for x in results] == [("unknown", "rejected")]
    assert r.xpending(k.jobs, "planners")["pending"] == 0
    planner.close()


def test_a_planner_whose_slots_never_free_says_what_holds_it(
    r: redis.Redis[bytes], settings: Settings, caplog: pytest.LogCaptureFixture,
) -> None:
    import logging

    peer = PeerWorker(settings, r)
    peer.beat()  # a worker that announces two slots and never reads its batches
    planner = Planner(settings, PlannerConfig(max_batch=1))
    planner.stall.after_ms = 300.0
    stop = threading.Event()
    t = threading.Thread(target=planner.run, args=(stop,), daemon=True)
    k = Keys(settings.namespace)
    with caplog.at_level(logging.WARNING, logger="adaserve.planner"):
        t.start()
        streams.publish(r, k.jobs, encode(_job("held", n=4, deadline_ms=30_000)))
        end = time.time() + 5.0
        while time.time() < end and not any("no batch sent" in m for m in caplog.messages):
            time.sleep(0.05)
        stop.set()
        t.join(5)
    told = [m for m in caplog.messages if "no batch sent" in m]
    assert told, caplog.messages
    assert "'inflight': 2" in told[0] and "'slots': 2" in told[0] and "'pending': 2" in told[0]
    assert "c0_ms" in told[0]  # the policy's own belief (ORLOJ's batch latency fit) is in the line


@pytest.mark.parametrize("queue_ms, sent", [(10.0, 2), (0.0, 6)])
def test_a_pool_whose_batches_run_long_gets_fewer_batches_than_its_slots(
    r: redis.Redis[bytes], settings: Settings, queue_ms: float, sent: int,
) -> None:
    peer = PeerWorker(settings, r, slots=8)
    peer.beat()  # eight slots, and the batches are never read
    planner = Planner(settings, PlannerConfig(max_batch=1, queue_ms=queue_ms))
    stop = threading.Event()
    t = threading.Thread(target=planner.run, args=(stop,), daemon=True)
    k = Keys(settings.namespace)
    t.start()
    try:
        end = time.time() + 5.0
        while time.time() < end and "cpu" not in planner.pools.views:
            time.sleep(0.02)
        for i in range(3):  # what the pool's batches took lately: 25 ms each
            streams.publish(r, k.telemetry, encode(BatchFinished(
                ts=time.time() * 1000, batch_id=f"old{i}", pool="cpu", worker="peer", model="m", size=1,
                exec_ms=25.0, items=[])))
        while time.time() < end and "cpu" not in planner.follow.batch:
            time.sleep(0.02)
        streams.publish(r, k.jobs, encode(_job("long", n=6, deadline_ms=30_000)))
        while time.time() < end and r.xlen(k.batches("cpu")) < sent:
            time.sleep(0.02)
        time.sleep(0.3)  # and no more than that
        assert r.xlen(k.batches("cpu")) == sent
    finally:
        stop.set()
        t.join(5)


def _columns_job(jid: str, rows: np.ndarray, model: str = "m") -> bytes:
    """A job sent in columns (docs/wire.md, *Jobs in columns*): one stacked tensor, n ids."""
    body = {"v": 1, "type": "job", "id": jid, "model": model, "reply_to": "client", "slo": {"deadline_ms": 2000},
            "request_ids": [f"r{i}" for i in range(len(rows))],
            "inputs": {"x": {"dtype": "float32", "shape": list(rows.shape), "data": rows.astype(np.float32).tobytes()}}}
    return msgpack.packb(body, use_bin_type=True)


def test_a_job_in_columns_is_served_per_request_as_a_job_sent_request_by_request(
    pipeline: PeerWorker, r: redis.Redis[bytes], settings: Settings,
) -> None:
    k = Keys(settings.namespace)
    rows = np.stack([np.full(2, i, np.float32) for i in range(6)])
    streams.publish(r, k.jobs, _columns_job("cols", rows))
    streams.publish(r, k.jobs, encode(_job("reqs", n=3)))  # shares batches with the job in columns
    streams.publish(r, k.jobs, _columns_job("nope", rows[:2], model="nope"))
    streams.publish(r, k.jobs, _columns_job("shape", np.zeros((2, 3), np.float32)))
    nan = rows[:3].copy()
    nan[1, 0] = np.nan
    streams.publish(r, k.jobs, _columns_job("nan", nan))
    results = _collect(r, k, 6 + 3 + 2 + 2 + 3)
    got = sorted((x.job_id, x.request_id, x.status, x.prediction) for x in results)
    assert [g for g in got if g[0] == "cols"] == [("cols", f"r{i}", "completed", 2 * i) for i in range(6)]
    assert [g[2] for g in got if g[0] == "reqs"] == ["completed"] * 3
    # a refused job in columns gets one rejected result per request id, with the reason
    for jid, n, reason in (("nope", 2, "unknown_model"), ("shape", 2, "schema"), ("nan", 3, "non_finite")):
        mine = [x for x in results if x.job_id == jid]
        assert sorted(x.request_id for x in mine) == [f"r{i}" for i in range(n)]
        assert {x.status for x in mine} == {"rejected"} and all(x.reason.startswith(reason) for x in mine), mine
    time.sleep(0.3)
    assert len(results) == len({(x.job_id, x.request_id, x.status) for x in results})  # each exactly once
    assert r.xpending(k.jobs, "planners")["pending"] == 0


def test_a_finish_is_heard_when_the_step_that_read_it_comes_to_dispatch(
    r: redis.Redis[bytes], settings: Settings,
) -> None:
    """With every slot taken, a step waits for a finish and then admits what arrived meanwhile
    before it can refill the slot: the finish counts as heard after that admission, which is how
    long the slot really waited (the pipeline simulator replays it)."""
    peer = PeerWorker(settings, r)
    peer.beat()  # two slots, and the batches are never read: the pool stays full
    planner = Planner(settings, PlannerConfig(max_batch=1))
    planner.start()
    k = Keys(settings.namespace)
    streams.publish(r, k.jobs, encode(_job("held", n=3, deadline_ms=30_000)))
    end = time.time() + 5.0
    while time.time() < end and r.xlen(k.batches("cpu")) < 2:
        planner.step()
    first = streams.read(r, {k.batches("cpu"): "0"})[0]
    batch = decode(first.raw, expect=Batch)
    done = time.time() * 1000.0
    r.xadd(k.telemetry, {b"m": encode(BatchFinished(ts=done, batch_id=batch.id, pool="cpu", worker="peer", model="m",
                                                    size=1, exec_ms=0.5, items=[]))})
    streams.publish(r, k.jobs, encode(_job("later", n=1, deadline_ms=30_000)))
    admit = planner.intake.admit

    def slow_admit(*a, **kw):  # type: ignore[no-untyped-def]
        time.sleep(0.08)  # what admitting a backlog costs a planner that is behind
        return admit(*a, **kw)

    planner.intake.admit = slow_admit  # type: ignore[method-assign]
    planner.step()
    lags = [lag for span in planner.report._heard.values() for lag in span]
    assert len(lags) == 1 and lags[0] >= 80.0
