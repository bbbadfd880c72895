"""MOSEL end to end: the planner and a real CPU worker (in this process, on threads) serving the
real av-digits model on held-out audio-image pairs, through the test session's server.

This CPU runs av-digits in well under a millisecond per batch, so no deadline a pipeline can meet
puts it under pressure. The pressure test therefore stores a profile as if measured on a device a
thousand times slower (every latency x 1000, the same accuracies): the planner then predicts
misses and must choose cheaper mixes, while the real model still serves every request.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
import redis

from adaserve.broker import Keys, Settings, decode
from adaserve.broker.profiles import Profile
from adaserve.models.datasets import sample_inputs
from adaserve.planner.config import PlannerConfig
from adaserve.planner.mosel.matrix import StrategyMatrix, matrix_path
from adaserve.planner.mosel.store import SHIPPED_DIR
from adaserve.planner.service import Planner
from adaserve.producers import Client, make_job
from adaserve.workers import Worker, WorkerConfig

pytestmark = pytest.mark.slow
MODEL = "av-digits"
SLOWER = 1000.0


def shipped(model: str = MODEL) -> tuple[Profile, StrategyMatrix]:
    path = SHIPPED_DIR / f"{model}.json"
    return Profile.from_json(path.read_bytes()), StrategyMatrix.load(matrix_path(path))


def store_slow_profile(settings: Settings, r: redis.Redis[bytes], model: str = MODEL,
                       slower: float = SLOWER) -> Profile:
    """The shipped profile with every latency x ``slower``, in Redis, and its matrix in the cache.

    Scaling every latency by one factor leaves each cheapest mix unchanged, so the shipped
    matrix with scaled latencies is this profile's matrix (saves the planner solving it again).
    """
    profile, matrix = shipped(model)
    slow = profile.model_copy(update={"created_ms": profile.created_ms + 1.0, "latency": [
        p.model_copy(update={"p50_ms": p.p50_ms * slower, "p90_ms": p.p90_ms * slower, "mean_ms": p.mean_ms * slower})
        for p in profile.latency]})
    data = matrix.model_dump()
    data.update(profile_created_ms=slow.created_ms, batch_ms=[[v * slower for v in row] for row in matrix.batch_ms])
    StrategyMatrix.model_validate(data).save(settings.data_dir / "mosel" / f"{model}-{int(slow.created_ms)}.mosel.json")
    r.set(Keys(settings.namespace).profile(model), slow.to_json())
    return slow


@contextmanager
def pipeline(settings: Settings, modality: str = "random", model: str = MODEL) -> Iterator[threading.Thread]:
    """A real worker (ready first), then the planner: jobs submitted inside the block before the
    planner reads are all in its first read."""
    worker = Worker(settings, WorkerConfig(models=(model,), threads=1, name="w-" + uuid.uuid4().hex[:6]))
    planner = Planner(settings, PlannerConfig(modality=modality))
    stop = threading.Event()
    serving = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    serving.start()
    assert worker.ready.wait(60), "worker did not start"
    planning = threading.Thread(target=planner.run, args=(stop,), daemon=True)
    try:
        yield planning
    finally:
        stop.set()
        for t in (serving, planning):
            if t.is_alive():
                t.join(15)
                assert not t.is_alive(), f"{t.name} did not stop"


def events(r: redis.Redis[bytes], settings: Settings, kind: str) -> list[object]:
    out = []
    for _, f in r.xrange(Keys(settings.namespace).telemetry):
        ev = decode(f[b"m"])
        if ev.event == kind:
            out.append(ev)
    return out


@pytest.mark.parametrize("modality", ["optimized", "random", "aggressive"])
def test_a_tight_job_under_load_gets_a_cheaper_mix_and_keeps_its_floor(
        settings: Settings, r: redis.Redis[bytes], modality: str) -> None:
    profile = store_slow_profile(settings, r)
    acc = {q.variant: q.value for q in profile.quality}
    inputs, labels = sample_inputs(MODEL, 40, seed=4)
    with pipeline(settings, modality) as start_planner, Client(settings) as client:
        # Two small jobs due first (any accuracy will do), then a 32-request job with floor 0.75
        # whose deadline no plan at the richest mix can meet behind them; and one unreachable floor.
        ahead = [make_job(MODEL, list(inputs[4 * k:4 * k + 4]), 250.0, min_accuracy=0.67) for k in range(2)]
        tight = make_job(MODEL, list(inputs[8:40]), 400.0, min_accuracy=0.75)
        greedy = make_job(MODEL, list(inputs[:2]), 10_000.0, min_accuracy=0.99)
        handles = client.submit_many([*ahead, tight, greedy])
        start_planner.start()
        results = {h.job_id: h.result(30) for h in handles}

    got = results[tight.id]
    assert got.completed == 32
    subsets = [q.plan.variant for q in got.results]
    planned = {q.job_accuracy for q in got.results}
    assert len(planned) == 1
    (job_acc,) = planned
    # Cheaper than all modalities, never below the floor, and the reported subsets add up to it.
    assert 0.75 - 1e-9 <= job_acc < acc["audio+image"]
    assert np.mean([acc[s] for s in subsets]) == pytest.approx(job_acc)
    assert all(q.plan.modalities == tuple(q.plan.variant.split("+")) for q in got.results)
    for job in ahead:
        res = results[job.id]
        assert res.completed == 4 and res.results[0].job_accuracy >= 0.67 - 1e-9
    # The real model's predictions on the requests it served.
    assert np.mean(np.asarray(got.predictions) == labels[8:40]) >= 0.5

    bad = results[greedy.id]
    assert bad.counts["rejected"] == 2 and all(q.reason.startswith("accuracy_floor") for q in bad.results)
    replans = events(r, settings, "planner.replanned")
    assert any(e.reason == "cheaper" and e.after_accuracy < e.before_accuracy for e in replans)
    assert {e.job_id for e in replans} <= {j.id for j in [*ahead, tight]}


def test_without_pressure_every_request_uses_every_modality(settings: Settings, r: redis.Redis[bytes]) -> None:
    inputs, labels = sample_inputs(MODEL, 48, seed=5)
    with pipeline(settings, "optimized") as start_planner, Client(settings) as client:
        handles = client.submit_many([make_job(MODEL, list(inputs[16 * k:16 * k + 16]), 5_000.0,
                                               min_accuracy=0.7 + 0.1 * k) for k in range(3)])
        start_planner.start()
        results = [h.result(30) for h in handles]
    for res in results:
        assert res.completed == 16
        assert {(q.plan.variant, q.plan.modalities) for q in res.results} == {("audio+image", ("audio", "image"))}
        assert all(q.job_accuracy == pytest.approx(0.96) for q in res.results)
    preds = np.asarray([p for res in results for p in res.predictions])
    assert np.mean(preds == labels) >= 0.85
    assert not events(r, settings, "planner.replanned")


def test_av_video_tight_job_runs_fewer_video_requests_and_keeps_its_floor(
        settings: Settings, r: redis.Redis[bytes]) -> None:
    # av-video's video encoder costs about 100x its audio encoder per request; its profile x 30
    # makes a 32-request job at all modalities (about 680 ms) miss a 600 ms deadline, while the
    # mixes meeting its 0.94 floor (about a third of the requests on audio+video) fit.
    model = "av-video"
    profile = store_slow_profile(settings, r, model, 30.0)
    acc = {q.variant: q.value for q in profile.quality}
    inputs, labels = sample_inputs(model, 40, seed=4)
    with pipeline(settings, "optimized", model) as start_planner, Client(settings) as client:
        ahead = [make_job(model, list(inputs[4 * k:4 * k + 4]), 250.0, min_accuracy=0.75) for k in range(2)]
        tight = make_job(model, list(inputs[8:40]), 600.0, min_accuracy=0.94)
        handles = client.submit_many([*ahead, tight])
        start_planner.start()
        results = {h.job_id: h.result(30) for h in handles}

    got = results[tight.id]
    assert got.completed == 32
    subsets = [q.plan.variant for q in got.results]
    (job_acc,) = {q.job_accuracy for q in got.results}
    assert 0.94 - 1e-9 <= job_acc < acc["audio+video"]
    assert np.mean([acc[s] for s in subsets]) == pytest.approx(job_acc)
    costly = subsets.count("audio+video")
    assert 0 < costly < 32 and subsets.count("audio") == 32 - costly  # never video alone
    for job in ahead:
        assert results[job.id].completed == 4 and results[job.id].results[0].job_accuracy >= 0.75 - 1e-9
    assert np.mean(np.asarray(got.predictions) == labels[8:40]) >= 0.8
    replans = events(r, settings, "planner.replanned")
    assert any(e.reason == "cheaper" and e.job_id == tight.id for e in replans)
