"""A worker serving the lm family against the real server: plans that move to another depth or
model load it without dropping a batch, results name what served them, the memory budget is
advertised and batch.finished reports the load a batch paid for."""

from __future__ import annotations

import threading

import numpy as np

from adaserve.broker import Keys, Settings
from adaserve.broker.codec import decode
from adaserve.broker.events import BatchFinished, WorkerHeartbeat
from adaserve.models.lm.corpus import SHARED_VOCAB
from adaserve.models.lm.prompts import drifting_prompts
from adaserve.workers import Worker, WorkerConfig

PLANS = [("ee-lm-xs", "depth1", 1), ("ee-lm-xs", "depth2", 2), ("ee-lm-s", "depth2", 2),
         ("ee-lm-s", "depth4", 4), ("ee-lm-s", "early-exit", 4)]


def test_switching_depth_and_model_drops_no_batch(settings: Settings, feeder, r) -> None:
    prompts = drifting_prompts(3 * len(PLANS), seed=0)
    worker = Worker(settings, WorkerConfig(name="w-lm", models=("ee-lm-xs",), threads=1, memory_mb=64))
    stop = threading.Event()
    thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    thread.start()
    try:
        assert worker.ready.wait(30)
        hb = decode(r.hget(Keys(settings.namespace).workers, worker.id))
        assert isinstance(hb, WorkerHeartbeat) and hb.memory_mb == 64
        sent = {}
        for k, (model, variant, depth) in enumerate(PLANS):
            rows = [{"tokens": SHARED_VOCAB.encode(p)} for _, p in prompts[3 * k:3 * k + 3]]
            batch, _ = feeder.batch(model=model, variant=variant, rows=rows)
            items = [it.model_copy(update={"kind": "generate"}) for it in batch.items]
            batch = batch.model_copy(update={"items": items})
            sent[batch.id] = (model, variant, depth)
            feeder.send(batch)  # all at once: the worker meets each change of plan mid-stream
        results = feeder.results(3 * len(PLANS), timeout=60)
        assert feeder.wait_for(lambda: len(feeder.events("batch.finished")) == len(PLANS), timeout=30)
    finally:
        stop.set()
        thread.join(15)
    assert len(results) == 3 * len(PLANS) and all(x.status == "completed" for x in results)
    by_job = {}
    for x in results:
        by_job.setdefault(x.job_id, []).append(x)
    for res in by_job.values():
        model, variant, depth = next(v for v in sent.values() if v[0] == res[0].model and v[1] == res[0].plan.variant)
        for x in res:
            assert (x.model, x.plan.variant, x.exit) == (model, variant, depth)
            hit = x.outputs["exit_at_tau"].to_numpy()
            assert hit.shape == x.outputs["confidence"].to_numpy().shape == (16,)
            assert set(np.unique(hit)) <= {0, *range(1, depth + 1)}
            assert x.outputs["prompt_ppl"].to_numpy().shape == () and float(x.outputs["prompt_ppl"].to_numpy()) > 1
            if variant == "early-exit":
                left = x.outputs["exits"].to_numpy()
                assert np.array_equal(left, np.where(hit > 0, hit, depth))
    finished = {ev.batch_id: ev for ev in feeder.events("batch.finished")}
    assert all(isinstance(ev, BatchFinished) for ev in finished.values())
    for bid, (model, variant, _) in sent.items():
        ev = finished[bid]
        preloaded = (model, variant) == ("ee-lm-xs", "depth2")  # the default variant, loaded at start
        assert (ev.load_s is None) == preloaded, (model, variant, ev.load_s)
        assert ev.load_s is None or ev.load_s > 0
