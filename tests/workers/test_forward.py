"""Split placement on the worker side: part 1's batch becomes part 2's, exactly once.

A two-part toy model stands in for effnet-lite0 (whose own split runs in tests/serving): part 1
doubles the input into ``intermediate``, part 2 predicts the index of its largest value.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import redis

from adaserve.broker import Keys, Settings
from adaserve.broker.codec import decode
from adaserve.broker.errors import ModelNotFound
from adaserve.broker.finalize import Finalizer
from adaserve.broker.messages import Batch, Placement, Plan
from adaserve.broker.settings import Limits
from adaserve.broker.streams import read_group
from adaserve.workers import Worker, WorkerConfig
from adaserve.workers.execute import BatchOutcome, ItemOutcome, WireRow
from adaserve.workers.forward import Forwarder, next_batches
from adaserve.workers.runtime.base import RunOutput, SplitPart


class Part(SplitPart):
    model, device = "toy", "cpu"

    def __init__(self, k: int) -> None:
        self.variant = f"part{k}"
        self.inputs = ("x",) if k == 1 else ("intermediate",)
        self.next = "part2" if k == 1 else None

    def run(self, inputs: dict[str, np.ndarray]) -> RunOutput:
        if self.next is not None:
            x = inputs["x"]
            return RunOutput({"intermediate": x * 2.0}, request_exec_s=np.full(len(x), 0.002))
        h = inputs["intermediate"]
        return RunOutput({}, predictions=h.argmax(1), confidences=np.full(len(h), 0.9))


def load(model: str, variant: str, device: str, data_dir: Path) -> Part:
    if model != "toy" or variant not in ("default", "part1", "part2"):
        raise ModelNotFound(f"no {model}/{variant}")
    return Part(2 if variant == "part2" else 1)


@contextmanager
def worker(settings: Settings, pool: str) -> Iterator[Worker]:
    w = Worker(settings, WorkerConfig(pool=pool, name=f"w-{pool}-{uuid.uuid4().hex[:4]}"), load=load,
               available=lambda d: ["toy"])
    stop = threading.Event()
    t = threading.Thread(target=w.run, args=(stop,), daemon=True)
    t.start()
    assert w.ready.wait(10)
    try:
        yield w
    finally:
        stop.set()
        t.join(15)


def _part1(feeder, rows: list[np.ndarray], *, next_pool: str | None = "b") -> Batch:
    batch, _ = feeder.batch(rows=[{"x": x} for x in rows], model="toy", variant="part1")
    return batch.model_copy(update={"plan": Plan(variant="part1", placement=Placement(pool="a", part=1, next_pool=next_pool))})


@pytest.fixture
def fa(feeder, settings: Settings, r: redis.Redis[bytes]):
    """The conftest's feeder (it plays the planner), on pool ``a``."""
    return type(feeder)(settings, r, pool="a")


def _rows(n: int) -> list[np.ndarray]:
    return [np.eye(4, dtype=np.float32)[i % 4] for i in range(n)]


def _stream(r: redis.Redis[bytes], settings: Settings, pool: str) -> list[Batch]:
    return [decode(f[b"m"], expect=Batch) for _, f in r.xrange(Keys(settings.namespace).batches(pool))]


def test_part_1_forwards_its_batch_to_the_next_pool_which_answers(settings: Settings, r: redis.Redis[bytes], fa) -> None:
    feeder = fa
    batch = _part1(feeder, _rows(3))
    with worker(settings, "a"):
        feeder.send(batch)
        assert feeder.wait_for(lambda: len(_stream(r, settings, "b")) == 1 and feeder.pending() == 0)
    (nb,) = _stream(r, settings, "b")
    assert nb.id == f"{batch.id}.0" and nb.model == "toy"
    assert (nb.plan.variant, nb.plan.placement) == ("part2", Placement(pool="b", part=2, prev_pool="a"))
    for old, new in zip(batch.items, nb.items):
        assert (new.job_id, new.request_id, new.reply_to, new.submitted_ms, new.deadline_ms) == \
               (old.job_id, old.request_id, old.reply_to, old.submitted_ms, old.deadline_ms)
        np.testing.assert_array_equal(new.inputs["intermediate"].to_numpy(), old.inputs["x"].to_numpy() * 2)
        assert new.prior_exec_ms > 0
    assert feeder.results(0, timeout=0.1) == []  # nothing ends before the last part
    (ev,) = feeder.events("batch.finished")
    assert (ev.batch_id, ev.pool, ev.variant, ev.size, ev.items) == (batch.id, "a", "part1", 3, [])
    with worker(settings, "b"):
        results = feeder.results(3)
    assert [x.prediction for x in results] == [0, 1, 2] and all(x.status == "completed" for x in results)
    assert all(x.timings.exec_ms >= nb.items[0].prior_exec_ms for x in results)


def test_a_batch_is_forwarded_once_however_often_it_is_finished(settings: Settings, r: redis.Redis[bytes], fa) -> None:
    """A crash after the forward, or a reclaim racing a slow worker: the second finish forwards nothing."""
    feeder = fa
    batch = _part1(feeder, _rows(2))
    feeder.send(batch)
    (entry,) = read_group(r, [feeder.keys.batches("a")], "a", "first", count=1)
    outcome = BatchOutcome("part1", [ItemOutcome("completed", outputs={"intermediate": WireRow("float32", [4], bytes(16))})
                                     for _ in range(2)], 0.0, 1.0, 1.0, next_variant="part2")
    fwd = Forwarder(r, settings, Finalizer(r, settings), limits=Limits(), worker="first", pool="a", device="cpu")
    assert fwd.forward(entry, batch, outcome, retry=lambda f: f()) == 1
    assert fwd.forward(entry, batch, outcome, retry=lambda f: f()) == 0
    assert len(_stream(r, settings, "b")) == 1 and feeder.pending() == 0
    assert [e.batch_id for e in feeder.events("batch.finished")] == [batch.id]


def test_requests_that_fail_in_part_1_end_there(settings: Settings, r: redis.Redis[bytes], fa) -> None:
    feeder = fa
    batch = _part1(feeder, [_rows(1)[0], np.ones(7, np.float32)])
    items = [ItemOutcome("completed", outputs={"intermediate": WireRow("float32", [4], bytes(16))}),
             ItemOutcome("failed", "bad_input: input 'x' has shape [7]")]
    feeder.send(batch)
    (entry,) = read_group(r, [feeder.keys.batches("a")], "a", "first", count=1)
    fwd = Forwarder(r, settings, Finalizer(r, settings), limits=Limits(), worker="first", pool="a", device="cpu")
    fwd.forward(entry, batch, BatchOutcome("part1", items, 0.0, 1.0, 1.0, next_variant="part2"), retry=lambda f: f())
    (res,) = feeder.results(1)
    assert (res.request_id, res.status) == ("r1", "failed") and "shape [7]" in res.reason
    (nb,) = _stream(r, settings, "b")
    assert [i.request_id for i in nb.items] == ["r0"]
    (ev,) = feeder.events("batch.finished")
    assert [(i.request_id, i.status) for i in ev.items] == [("r1", "failed")] and ev.size == 2


def test_a_part_without_a_next_pool_fails_with_a_reason(settings: Settings, r: redis.Redis[bytes], fa) -> None:
    feeder = fa
    with worker(settings, "a"):
        feeder.send(_part1(feeder, _rows(2), next_pool=None))
        results = feeder.results(2)
    assert all(x.status == "failed" and x.reason.startswith("bad_plan:") for x in results)


def test_forwarded_batches_stay_within_the_message_limit(fa) -> None:
    feeder = fa
    rows = [WireRow("float32", [1000], np.full(1000, i, np.float32).tobytes()) for i in range(5)]
    batch = _part1(feeder, _rows(5))
    outcome = BatchOutcome("part1", [ItemOutcome("completed", outputs={"intermediate": w}) for w in rows],
                           0.0, 1.0, 1.0, next_variant="part2")
    raws, failed = next_batches(batch, outcome, now_ms=0.0, limits=Limits(max_message_bytes=9000))
    assert failed == {} and len(raws) > 1 and all(len(x) <= 9000 for x in raws)
    got = sorted(i.request_id for raw in raws for i in decode(raw, Limits(max_message_bytes=9000), expect=Batch).items)
    assert got == [f"r{i}" for i in range(5)]
    raws, failed = next_batches(batch, outcome, now_ms=0.0, limits=Limits(max_message_bytes=2048))
    assert raws == [] and set(failed) == set(range(5)) and failed[0].startswith("limit:")
