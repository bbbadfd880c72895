"""The planner's online-feedback round against a real server, a real rq worker and the real ee-audio model."""

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
from adaserve.planner.orloj.feed import OnlineFeedback
from adaserve.planner.policies import make_scheduler

MODEL = "ee-audio"


@pytest.fixture
def rq_clean(r: redis.Redis[bytes], settings: Settings) -> Iterator[None]:
    yield
    for key in r.scan_iter(match=f"rq:*{settings.namespace}*", count=1000):
        r.delete(key)


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _server_ms(r: redis.Redis[bytes]) -> float:
    sec, usec = r.time()
    return sec * 1000.0 + usec / 1000.0


def _served(r: redis.Redis[bytes], settings: Settings, batch_id: str, model: str, rows: list[np.ndarray]) -> None:
    """A batch as the planner sent it (in the pool's stream) and its ``batch.finished`` event."""
    now = _server_ms(r)
    items = [BatchItem(job_id="j", request_id=f"r{i}", app=f"app{i % 2}", reply_to="x",
                       inputs={"audio": Tensor.from_numpy(a)}, submitted_ms=now, deadline_ms=now + 1000)
             for i, a in enumerate(rows)]
    keys = Keys(settings.namespace)
    publish(r, keys.batches("cpu"), encode(Batch(id=batch_id, model=model, items=items, dispatched_ms=now,
                                                 plan=Plan(placement=Placement(pool="cpu")))))
    timings = [RequestTiming(job_id="j", request_id=f"r{i}", app=f"app{i % 2}", status="completed", queue_ms=1.0,
                             exec_ms=2.0, total_ms=3.0) for i in range(len(rows))]
    publish(r, keys.telemetry, encode(BatchFinished(ts=now + 5, batch_id=batch_id, pool="cpu", worker="w", model=model,
                                                    size=len(rows), exec_ms=2.0, items=timings)))


def test_auto_reruns_only_while_a_profiler_worker_lives_and_feeds_orloj(
        r: redis.Redis[bytes], settings: Settings, rq_clean: None) -> None:
    from rq import Queue, SimpleWorker
    from rq.serializers import JSONSerializer

    from adaserve.models.datasets import sample_inputs

    rows = [row["audio"] for row in sample_inputs(MODEL, 3, seed=0)[0]]
    orloj, fifo = make_scheduler("orloj", model=MODEL), make_scheduler("fifo", model="other")
    scheds = {MODEL: orloj, "other": fifo}
    clock = Clock()
    feed = OnlineFeedback(r, settings, rate=1.0, period_s=1.0, probe_s=0.0, clock=clock, rng=random.Random(0))
    queue = Queue(Keys(settings.namespace).rq_queue, connection=r, serializer=JSONSerializer)

    def round_() -> None:
        clock.t += 1.0
        assert feed.tick(scheds)

    round_()
    _served(r, settings, "b1", MODEL, rows)
    round_()
    assert feed.stats.enqueued == 0 and queue.count == 0  # no profiler worker: nothing piles up

    presence = SimpleWorker([queue], connection=r, serializer=JSONSerializer)
    presence.register_birth()
    try:
        assert feed.worker_present()
        round_()  # starts reading from now
        _served(r, settings, "b2", MODEL, rows)
        _served(r, settings, "b3", "other", rows)  # FIFO takes no samples: never re-run
        round_()
        assert feed.stats.enqueued == 3 and queue.count == 3
    finally:
        presence.register_death()
    assert not feed.worker_present()

    SimpleWorker([queue], connection=r, serializer=JSONSerializer).work(burst=True)
    times = [queue.fetch_job(i).return_value() for i in queue.finished_job_registry.get_job_ids()]  # type: ignore[union-attr]
    assert len(times) == 3 and all(0 < t < 1.0 for t in times)
    before = len(orloj.dists)  # type: ignore[attr-defined]
    round_()
    assert feed.stats.drained == 3 and len(orloj.dists) == before + 3  # type: ignore[attr-defined]
    round_()
    assert feed.stats.drained == 3  # each sample is taken once

    # a planner started again (a new feed, a new scheduler) starts from the samples already measured
    again = make_scheduler("orloj", model=MODEL)
    fresh = OnlineFeedback(r, settings, mode="off", clock=clock)
    assert not fresh.tick({MODEL: again})  # off: not even the samples
    restarted = OnlineFeedback(r, settings, rate=1.0, period_s=1.0, probe_s=0.0, clock=clock, rng=random.Random(0))
    assert restarted.tick({MODEL: again})
    assert restarted.stats.drained == 3 and len(again.dists) == len(orloj.dists)  # type: ignore[attr-defined]


def test_on_mode_caps_the_queue_and_per_round(r: redis.Redis[bytes], settings: Settings, rq_clean: None) -> None:
    from rq import Queue
    from rq.serializers import JSONSerializer

    rows = [np.zeros(8, dtype=np.float32)] * 6
    scheds = {MODEL: make_scheduler("orloj", model=MODEL)}
    clock = Clock()
    feed = OnlineFeedback(r, settings, mode="on", rate=1.0, period_s=1.0, per_tick=4, max_queued=5, clock=clock)
    queue = Queue(Keys(settings.namespace).rq_queue, connection=r, serializer=JSONSerializer)
    for batch_id in ("a", "b"):
        assert feed.tick(scheds)
        _served(r, settings, batch_id, MODEL, rows)
        clock.t += 1.0
    assert feed.tick(scheds)
    assert queue.count == 5  # 4 from the first round of reading, then room for 1
    assert feed.stats.sampled == 12 and feed.stats.enqueued == 5


def test_period_off_mode_and_errors(r: redis.Redis[bytes], settings: Settings) -> None:
    clock = Clock()
    feed = OnlineFeedback(r, settings, period_s=5.0, clock=clock)
    scheds = {MODEL: make_scheduler("orloj", model=MODEL)}
    assert feed.tick(scheds) and not feed.tick(scheds)  # nothing until the period has passed
    clock.t = 5.0
    assert feed.tick(scheds) and feed.stats.ticks == 2
    off = OnlineFeedback(r, settings, mode="off", clock=clock)
    assert not off.tick(scheds) and off.stats.ticks == 0
    broken = OnlineFeedback(redis.Redis(port=1, socket_connect_timeout=0.2), settings, mode="on", clock=clock)
    assert broken.tick(scheds) and broken.stats.errors == 1  # logged, never raised into the planner loop
    for bad in ({"mode": "sometimes"}, {"period_s": 0.0}, {"rate": 1.5}, {"per_tick": 0}):
        with pytest.raises(ValueError):
            OnlineFeedback(r, settings, **bad)  # type: ignore[arg-type]


def test_the_planner_ticks_the_feed_from_its_housekeeping(settings: Settings) -> None:
    from adaserve.planner.service import Planner

    planner = Planner(settings)
    try:
        assert planner.feedback.mode == "auto"
        planner.start()
        planner._housekeeping()
        planner._housekeeping()  # within the period: a clock read and nothing else
        assert planner.feedback.stats.ticks == 1 and planner.feedback.stats.errors == 0
    finally:
        planner.r.close()


def test_the_first_round_with_an_orloj_scheduler_imports_nothing(settings: Settings) -> None:
    """rq's import (15-22 ms) is paid when the feed is built at the planner's start, not in the
    loop on the first round that has an ORLOJ scheduler; a feed that is off never imports it."""
    import subprocess
    import sys

    code = f"""
import sys
from adaserve.broker import connect, load_settings
from adaserve.planner.orloj.feed import OnlineFeedback
from adaserve.planner.policies import make_scheduler
s = load_settings(redis_url={settings.redis_url!r}, namespace={settings.namespace!r})
off = OnlineFeedback(connect(s), s, mode="off")
print("off", any(m == "rq" or m.startswith("rq.") for m in sys.modules))
feed = OnlineFeedback(connect(s), s, clock=lambda: 0.0)
before = set(sys.modules)
assert feed.tick({{"fsdd-cnn": make_scheduler("orloj", model="fsdd-cnn")}})
print("new", sorted(m for m in set(sys.modules) - before if m == "rq" or m.startswith("rq.")))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split("\n")[:2] == ["off False", "new []"], out.stdout + out.stderr
