"""The online profiler against a real server: sampling, rq jobs (JSON), the re-run, draining."""

from __future__ import annotations

import random
from collections.abc import Iterator

import numpy as np
import pytest
import redis

from adaserve.broker import Settings
from adaserve.broker.codec import encode
from adaserve.broker.events import BatchFinished, RequestTiming
from adaserve.broker.keys import Keys
from adaserve.broker.messages import Batch, BatchItem, Placement, Plan
from adaserve.broker.streams import publish
from adaserve.broker.tensors import Tensor
from adaserve.planner.orloj.profiler import Rerun, enqueue_reruns, read_samples, sample_finished, samples_key
from adaserve.workers.rerun import find_item, record
from adaserve.workers.runtime.base import RunOutput


def _finished(batch_id: str, ts: float, statuses: tuple[str, ...] = ("completed", "completed", "expired"),
              kept: bool = True) -> bytes:
    items = [RequestTiming(job_id="j", request_id=f"r{i}", app=f"app{i % 2}", status=st, queue_ms=1.0,
                           exec_ms=30.0, total_ms=31.0) for i, st in enumerate(statuses)]
    return encode(BatchFinished(ts=ts, batch_id=batch_id, pool="cpu", worker="w", model="m", size=len(items),
                                exec_ms=30.0, items=items, kept=kept))


def _batch(batch_id: str, now_ms: float) -> bytes:
    item = BatchItem(job_id="j", request_id="r0", app="app0", reply_to="x",
                     inputs={"x": Tensor.from_numpy(np.arange(4, dtype=np.float32))},
                     submitted_ms=now_ms, deadline_ms=now_ms + 1000)
    return encode(Batch(id=batch_id, model="m", plan=Plan(placement=Placement(pool="cpu")), items=[item],
                        dispatched_ms=now_ms))


@pytest.fixture
def rq_clean(r: redis.Redis[bytes], settings: Settings) -> Iterator[None]:
    yield
    for key in r.scan_iter(match=f"rq:*{settings.namespace}*", count=1000):
        r.delete(key)


def test_sampling_follows_the_telemetry_stream(r: redis.Redis[bytes], settings: Settings) -> None:
    tele = Keys(settings.namespace).telemetry
    publish(r, tele, _finished("b0", 1.0))
    cursor, picked = sample_finished(r, settings, cursor="$", rate=1.0)
    assert picked == []  # "$": from now on
    publish(r, tele, _finished("b1", 2.0))
    publish(r, tele, _finished("gone", 2.5, kept=False))  # deleted at its ack: nothing to re-run from
    publish(r, tele, b"not msgpack")
    cursor, picked = sample_finished(r, settings, cursor=cursor, rate=1.0)
    assert [(p.batch_id, p.request_id, p.app) for p in picked] == [("b1", "r0", "app0"), ("b1", "r1", "app1")]
    assert sample_finished(r, settings, cursor=cursor, rate=1.0)[1] == []
    _, none = sample_finished(r, settings, cursor="0-0", rate=0.0, rng=random.Random(0))
    assert none == []
    with pytest.raises(ValueError):
        sample_finished(r, settings, rate=2.0)


def test_reruns_are_json_rq_jobs_that_record_the_time_alone(
        r: redis.Redis[bytes], settings: Settings, rq_clean: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from rq import Queue, SimpleWorker
    from rq.serializers import JSONSerializer

    import adaserve.workers.runtime as runtime

    sec, usec = r.time()
    now_ms = sec * 1000.0 + usec / 1000.0
    publish(r, Keys(settings.namespace).batches("cpu"), _batch("b7", now_ms))
    spec = Rerun("m", "default", "cpu", "cpu", "b7", "r0", "j", "app0", now_ms + 50)
    seen: list[np.ndarray] = []

    class FakeRunner:
        def run(self, inputs: dict[str, np.ndarray]) -> RunOutput:
            seen.append(inputs["x"])
            return RunOutput(outputs={}, request_exec_s=np.array([0.0123]))

    monkeypatch.setattr(runtime, "load_runner", lambda *a: FakeRunner())
    ids = enqueue_reruns(r, settings, [spec])
    queue = Queue(Keys(settings.namespace).rq_queue, connection=r, serializer=JSONSerializer)
    assert queue.job_ids == ids
    SimpleWorker([queue], connection=r, serializer=JSONSerializer).work(burst=True)
    job = queue.fetch_job(ids[0])
    assert job is not None and job.is_finished and job.return_value() == pytest.approx(0.0123)
    assert seen[0].shape == (1, 4)  # the request alone: a batch of one
    got, last = read_samples(r, settings, "m")
    assert got == [("app0", pytest.approx(0.0123))]
    assert read_samples(r, settings, "m", after=last) == ([], last)


def test_find_item_and_read(r: redis.Redis[bytes], settings: Settings) -> None:
    sec, usec = r.time()
    now_ms = sec * 1000.0 + usec / 1000.0
    publish(r, Keys(settings.namespace).batches("cpu"), _batch("b9", now_ms))
    assert find_item(r, settings.namespace, "cpu", "b9", "r0", now_ms + 10).request_id == "r0"  # type: ignore[union-attr]
    assert find_item(r, settings.namespace, "cpu", "b9", "r5", now_ms + 10) is None
    assert find_item(r, settings.namespace, "cpu", "gone", "r0", now_ms + 10) is None
    for i in range(5):
        record(r, settings.namespace, "m", "a", 0.01 * (i + 1))
    r.rpush(samples_key(settings.namespace, "m"), b"{broken", b"[1]")
    got, last = read_samples(r, settings, "m", limit=5)  # the newest five entries, two of them not samples
    assert [s for _, s in got] == pytest.approx([0.03, 0.04, 0.05])
    record(r, settings.namespace, "m", "b", 0.06)
    got, newest = read_samples(r, settings, "m", after=last)
    assert got == [("b", pytest.approx(0.06))]
    # the list stays: a planner started now, or a second planner, reads it all again
    assert [s for _, s in read_samples(r, settings, "m")[0]] == pytest.approx([0.01, 0.02, 0.03, 0.04, 0.05, 0.06])
    # an entry trimmed away since (more than ``limit`` came after it): the newest ``limit``
    for i in range(4):
        record(r, settings.namespace, "m", "c", 0.1 * (i + 1))
    assert [s for _, s in read_samples(r, settings, "m", after=newest, limit=2)[0]] == pytest.approx([0.3, 0.4])
