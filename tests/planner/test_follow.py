"""The planner's view of the workers, kept from a real server: heartbeats, stops, finished
batches and the in-flight count of each pool's consumer group."""

from __future__ import annotations

import logging
from typing import Any

import msgpack
import pytest
import redis

from adaserve.broker import Settings, streams
from adaserve.broker.events import WorkerHeartbeat
from adaserve.broker.keys import Keys
from adaserve.planner import follow
from adaserve.planner.core import Feedback
from adaserve.planner.follow import Follower
from adaserve.planner.state import WAIT_HALF_LIFE_MS


class _Learner:
    def __init__(self) -> None:
        self.seen: list[Feedback] = []

    def observe(self, fb: Feedback) -> None:
        self.seen.append(fb)


def _event(r: redis.Redis[bytes], keys: Keys, **body: Any) -> None:
    r.xadd(keys.telemetry, {b"m": streams.event_bytes(**body)})


def _beat(worker: str, pool: str, ts: float) -> dict[str, Any]:
    return {"event": "worker.heartbeat", "ts": ts, "worker": worker, "pool": pool, "slots": 2, "models": ["m"]}


def _finished(batch_id: str, ts: float, part: int | None = None, exec_ms: float = 5.0) -> dict[str, Any]:
    item = {"job_id": "j", "request_id": "r", "app": "a", "status": "completed", "queue_ms": 1.0,
            "exec_ms": 4.0, "total_ms": 6.0}
    return {"event": "batch.finished", "ts": ts, "batch_id": batch_id, "pool": "cpu", "worker": "w1",
            "model": "m", "size": 1, "exec_ms": exec_ms, "items": [item], "part": part}


def test_workers_come_and_go_and_finished_batches_teach_the_scheduler(
        settings: Settings, r: redis.Redis[bytes]) -> None:
    keys = Keys(settings.namespace)
    r.hset(keys.workers, "w0", msgpack.packb(_beat("w0", "gpu", 1000.0)))
    _event(r, keys, **_beat("old", "cpu", 900.0))  # before start: not replayed
    f = Follower(r, keys, worker_ttl_s=5.0)
    f.start()
    learner = _Learner()
    f.inflight.add("b1", "cpu", 1000.0, token=7)
    for body in (_beat("w1", "cpu", 1000.0), _finished("b1", 1020.0), _finished("b2", 1030.0, part=1),
                 {"event": "worker.stopped", "ts": 1040.0, "worker": "w0", "pool": "gpu"}):
        _event(r, keys, **body)
    f.read(None, {"m": learner})  # type: ignore[dict-item]
    f.pools.refresh(1050.0)
    assert sorted(f.pools.views) == ["cpu"]  # w0 stopped, "old" was never seen
    # Only the whole run teaches the policy; b1 waited 20 - 5 ms before it started.
    # It learns when the worker finished (s), not when this read happened, and which of its
    # decisions finished (its token): Clockwork's windows.
    assert [(fb.size, fb.exec_s, fb.apps, fb.finished_s, fb.token) for fb in learner.seen] == [
        (1, 0.005, ("a",), 1.02, 7)]
    # b1 went out to an idle pool: 15 ms is also the pool's floor, for a couple of seconds
    assert f.ahead_ms("m", 1050.0) == 15.0 and f.wait_ms("cpu", 1050.0) == 15.0 and f.wait_ms("gpu", 1050.0) == 0.0
    assert f.ahead_ms("m", 1020.0 + 2500.0) == 0.0  # the bound forgets, so expiry cannot latch


def test_the_mean_wait_applies_while_the_pool_is_busy_and_is_stamped_when_sent(
        settings: Settings, r: redis.Redis[bytes]) -> None:
    keys = Keys(settings.namespace)
    f = Follower(r, keys, worker_ttl_s=5.0)
    f.start()
    f.pools.heartbeat(WorkerHeartbeat(**_beat("w1", "cpu", 1000.0)))
    f.pools.refresh(1000.0)
    f.inflight.add("b1", "cpu", 990.0)             # decided at 990 ms ...
    f.inflight.add("b2", "cpu", 990.0, busy=True)  # ... behind b1
    f.inflight.stamp(1000.0)                       # ... and on the server at 1000 ms
    _event(r, keys, **_finished("b1", 1010.0))
    _event(r, keys, **_finished("b2", 1045.0))
    f.read(None, {})
    assert f.floor_ms("cpu", 1050.0) == 5.0        # 10 - 5 ms of execution, idle pool only
    f.pools.views["cpu"].inflight = 1
    assert f.wait_ms("cpu", 1045.0) == pytest.approx(5.0 + 0.1 * (40.0 - 5.0))  # the mean, busy pool
    # unconfirmed by any finish, its excess over the floor halves every WAIT_HALF_LIFE_MS: a mean
    # a stall raised cannot hold while it keeps every batch from going out
    assert f.wait_ms("cpu", 1045.0 + WAIT_HALF_LIFE_MS) == pytest.approx(5.0 + 0.1 * (40.0 - 5.0) / 2)
    assert f.wait_ms("cpu", 1045.0 + 10 * WAIT_HALF_LIFE_MS) == pytest.approx(5.0, abs=0.01)
    f.pools.views["cpu"].inflight = 0
    assert f.wait_ms("cpu", 1050.0) == 5.0


def test_a_pool_whose_batches_ran_long_is_limited_to_fewer_batches(
        settings: Settings, r: redis.Redis[bytes]) -> None:
    keys = Keys(settings.namespace)
    f = Follower(r, keys, worker_ttl_s=5.0)
    f.start()
    f.pools.heartbeat(WorkerHeartbeat(**{**_beat("w1", "cpu", 1000.0), "slots": 8}))
    f.pools.refresh(1000.0)
    f.limit_pools(10.0)
    assert f.pools.views["cpu"].limit == 8  # nothing heard yet: every slot
    for i in range(3):
        _event(r, keys, **_finished(f"b{i}", 1010.0 + 30.0 * i, exec_ms=25.0))
    f.read(None, {})
    f.limit_pools(10.0)
    assert f.pools.views["cpu"].limit == 2
    f.limit_pools(0.0)  # turned off
    assert f.pools.views["cpu"].limit == 8
    for i in range(100):  # the model changed: short batches again
        _event(r, keys, **_finished(f"c{i}", 1200.0 + i, exec_ms=1.0))
    f.read(None, {})
    f.limit_pools(10.0)
    assert f.pools.views["cpu"].limit == 8


def test_inflight_is_the_groups_lag_plus_pending(settings: Settings, r: redis.Redis[bytes]) -> None:
    keys = Keys(settings.namespace)
    f = Follower(r, keys, worker_ttl_s=5.0)
    f.pools.heartbeat(WorkerHeartbeat(**_beat("w1", "cpu", 1000.0)))
    f.pools.refresh(1000.0)
    f.refresh_inflight()  # creates the pool's group
    for _ in range(3):
        r.xadd(keys.batches("cpu"), {b"m": b"x"})
    streams.read_group(r, [keys.batches("cpu")], "cpu", "w1", count=1, block_ms=None)  # 1 pending, 2 lag
    f.refresh_inflight()
    assert f.pools.views["cpu"].inflight == 3 and f.pools.views["cpu"].free == 0


def test_a_batchs_length_is_weighted_by_itself() -> None:
    from adaserve.planner.state import BatchLength

    b = BatchLength(alpha=1.0)
    assert b.value is None
    b.add(float("nan"))  # nothing to learn from
    assert b.value is None
    b.add(25.0)
    assert b.value == 25.0
    mix = BatchLength(alpha=0.5)  # the two weigh alike
    mix.add(4.0)
    mix.add(25.0)
    assert mix.value == pytest.approx((4.0 * 4.0 + 25.0 * 25.0) / (4.0 + 25.0))  # 22.1, not 14.5


def test_recent_floor_is_the_minimum_of_its_horizon() -> None:
    from adaserve.planner.state import RecentFloor

    f = RecentFloor(horizon_ms=100.0)
    assert f.value(0.0) == 0.0
    for ms, v in ((0.0, 5.0), (10.0, 3.0), (20.0, 4.0), (30.0, 9.0)):
        f.add(ms, v)
    assert f.value(30.0) == 3.0
    assert f.value(115.0) == 4.0  # 3.0 (at 10 ms) is out of the horizon
    assert f.value(125.0) == 9.0 and f.value(200.0) == 0.0


def _unheard(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "adaserve.planner.follow" and r.levelno >= logging.ERROR]


def test_a_heartbeat_that_does_not_validate_is_reported_once_per_worker_and_reason(
        settings: Settings, r: redis.Redis[bytes], caplog: pytest.LogCaptureFixture) -> None:
    keys = Keys(settings.namespace)
    f = Follower(r, keys, worker_ttl_s=5.0)
    now = [0.0]
    f.unheard = follow._Unheard(clock=lambda: now[0])
    f.start()
    caplog.set_level(logging.ERROR, logger="adaserve.planner.follow")
    newer = {**_beat("w-new", "gpu", 1000.0), "slots": "plenty"}  # a field whose type changed
    for _ in range(3):
        _event(r, keys, **newer)
    r.xadd(keys.telemetry, {b"m": msgpack.packb({"v": 2, "type": "event", **_beat("w-v2", "cpu", 1000.0)})})
    _event(r, keys, event="job.made_up", ts=1000.0)  # another event the planner does not know: not its business
    f.read(None, {})
    told = _unheard(caplog)
    assert len(told) == 2, told  # three bad beats of w-new, one report
    assert "'w-new'" in told[0] and "'gpu'" in told[0] and "schema" in told[0] and "slots" in told[0]
    assert "'w-v2'" in told[1] and "version" in told[1]
    f.pools.refresh(1000.0)
    assert f.pools.views == {}  # neither is served, but now the operator knows
    caplog.clear()
    _event(r, keys, **newer)
    f.read(None, {})
    assert _unheard(caplog) == []
    now[0] = follow.RETELL_S + 1.0  # still going on a minute later: told again, with the count
    _event(r, keys, **newer)
    f.read(None, {})
    (again,) = _unheard(caplog)
    assert "'w-new'" in again and "3 more since the last report" in again


def test_an_unreadable_entry_in_the_workers_hash_is_reported_at_start(
        settings: Settings, r: redis.Redis[bytes], caplog: pytest.LogCaptureFixture) -> None:
    keys = Keys(settings.namespace)
    r.hset(keys.workers, "w-ok", msgpack.packb(_beat("w-ok", "cpu", 1000.0)))
    r.hset(keys.workers, "w-old", msgpack.packb({**_beat("w-old", "cpu", 1000.0), "models": "m"}))
    r.hset(keys.workers, "w-junk", b"\xc1")
    caplog.set_level(logging.ERROR, logger="adaserve.planner.follow")
    f = Follower(r, keys, worker_ttl_s=5.0)
    f.start()
    f.pools.refresh(1000.0)
    assert list(f.pools.views) == ["cpu"] and f.pools.workers == 1
    told = sorted(_unheard(caplog))
    assert len(told) == 2 and "'w-junk'" in told[0] and "undecodable" in told[0]
    assert "'w-old'" in told[1] and "schema" in told[1] and "models" in told[1]


def test_a_batch_finished_read_quickly_is_what_validation_gives() -> None:
    """The follower reads ``batch.finished`` from its map without validating the items; for what
    a worker writes that is exactly the validated event, and a map that is not one is validated
    (so its error is told) rather than half read."""
    import msgpack
    import numpy as np

    from adaserve.broker import Tensor
    from adaserve.broker.codec import decode
    from adaserve.broker.messages import Batch, BatchItem, Placement, Plan
    from adaserve.planner.follow import Finished, _quick_finished
    from adaserve.workers.execute import BatchOutcome, ItemOutcome
    from adaserve.workers.results import finished

    items = [BatchItem(job_id="j", request_id=f"r{i}", app=f"a{i}", reply_to="c", inputs={
        "x": Tensor.from_numpy(np.zeros(2, np.float32))}, submitted_ms=1.0, deadline_ms=9.0) for i in range(3)]
    batch = Batch(id="b", model="m", plan=Plan(variant="v", placement=Placement(pool="gpu", part=1, next_pool="cpu")),
                  items=items, dispatched_ms=2.0)
    outcome = BatchOutcome("v", [ItemOutcome("completed", exec_ms=0.5 + i) for i in range(3)], 3.0, 5.0, 2.0)
    _, raw = finished(batch, outcome, worker="w", pool="gpu", device="gpu")
    body = msgpack.unpackb(raw, raw=False)
    quick = _quick_finished(body)
    assert quick == Finished.of(decode(raw)) and quick is not None
    assert quick.apps == ("a0", "a1", "a2") and quick.item_exec_ms == (0.5, 1.5, 2.5) and quick.part == 1
    assert _quick_finished({**body, "items": [{"app": 3, "exec_ms": 1.0}]}) is None
    assert _quick_finished({**body, "ts": "soon"}) is None and _quick_finished({"event": "job.accepted"}) is None


def test_a_batch_finished_in_columns_read_quickly_is_what_validation_gives() -> None:
    """A batch that completed whole is reported with its requests' fields as columns; the follower
    reads them per batch, and what it reads is the validated event's."""
    import msgpack

    from adaserve.broker.codec import decode
    from adaserve.planner.follow import Finished, _quick_finished

    body = {"v": 1, "type": "event", "event": "batch.finished", "ts": 5.0, "batch_id": "b", "pool": "cpu",
            "worker": "w", "model": "m", "variant": "v", "device": "cpu", "size": 3, "exec_ms": 2.0, "part": None,
            "columns": {"job_id": ["j"] * 3, "request_id": ["r0", "r1", "r2"], "app": ["a0", "a1", "a0"],
                        "run": [""] * 3, "status": ["completed"] * 3, "queue_ms": [1.0, 1.0, 1.0],
                        "exec_ms": [0.5, 1.5, 2], "total_ms": [3.0] * 3, "exit": [None] * 3,
                        "confidence": [0.9, None, 0.1]}}
    quick = _quick_finished(body)
    assert quick is not None and quick == Finished.of(decode(msgpack.packb(body)))
    assert quick.apps == ("a0", "a1", "a0") and quick.item_exec_ms == (0.5, 1.5, 2.0) and quick.lm == ()
    assert _quick_finished({**body, "columns": {**body["columns"], "app": ["a0"]}}) is None  # type: ignore[dict-item]
    assert _quick_finished({**body, "columns": "x"}) is None


def test_requests_a_worker_ended_unrun_are_not_what_the_batch_ran() -> None:
    """A worker ends requests whose deadline passed before their batch ran ``expired`` and says so
    in ``expired``: the planner learns the run of the others (its size, apps and times), in the
    quick read and the validated one alike."""
    import msgpack
    import numpy as np

    from adaserve.broker import Tensor
    from adaserve.broker.codec import decode
    from adaserve.broker.events import BatchFinished
    from adaserve.broker.messages import Batch, BatchItem, Plan
    from adaserve.planner.follow import Finished, _quick_finished
    from adaserve.workers.execute import PAST_DEADLINE, BatchOutcome, ItemOutcome
    from adaserve.workers.results import finished

    items = [BatchItem(job_id="j", request_id=f"r{i}", app=f"a{i}", reply_to="c", inputs={
        "x": Tensor.from_numpy(np.zeros(2, np.float32))}, submitted_ms=1.0, deadline_ms=9.0) for i in range(3)]
    batch = Batch(id="b", model="m", plan=Plan(), items=items, dispatched_ms=2.0)
    outcome = BatchOutcome("v", [ItemOutcome("expired", PAST_DEADLINE), ItemOutcome("completed", exec_ms=0.5),
                                 ItemOutcome("completed", exec_ms=0.7)], 10.0, 11.0, 0.7)
    _, raw = finished(batch, outcome, worker="w", pool="cpu", device="cpu")
    ev = decode(raw)
    assert isinstance(ev, BatchFinished) and ev.size == 3 and ev.expired == 1
    assert [i.status for i in ev.items] == ["expired", "completed", "completed"]
    quick = _quick_finished(msgpack.unpackb(raw, raw=False))
    assert quick is not None and quick == Finished.of(ev)
    assert quick.size == 2 and quick.apps == ("a1", "a2") and quick.item_exec_ms == (0.5, 0.7)
    assert _quick_finished({**msgpack.unpackb(raw, raw=False), "expired": "1"}) is None
