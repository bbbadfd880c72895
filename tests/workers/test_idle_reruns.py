"""Re-runs alone while the worker idles: what is kept, when one is due, and what reaches the list
the planner drains (a real server; the tiny ONNX model and the shipped ee-lm-xs)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import redis

from adaserve.broker import Keys, Settings, Tensor
from adaserve.broker.messages import Batch, BatchItem, Generation
from adaserve.workers.idle_reruns import IdleReruns
from adaserve.workers.rerun import inputs_alone
from adaserve.workers.runners import RunnerCache


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def samples(r: redis.Redis[bytes], settings: Settings, model: str) -> list[dict[str, object]]:
    return [json.loads(x) for x in r.lrange(Keys(settings.namespace).orloj_samples(model), 0, -1)]


def with_apps(batch: Batch, apps: list[str]) -> Batch:
    return batch.model_copy(update={"items": [it.model_copy(update={"app": a}) for it, a in zip(batch.items, apps)]})


@pytest.fixture
def runners(zoo, tmp_path: Path) -> RunnerCache:
    cache = RunnerCache(zoo, device="cpu", data_dir=tmp_path)
    cache.get("tiny", "default")
    return cache


def test_an_idle_worker_records_a_served_requests_time_alone(settings: Settings, feeder, serve, r) -> None:
    batch, _ = feeder.batch(4)
    with serve(rerun_budget=0.5):
        feeder.send(batch)
        assert len(feeder.results(4)) == 4
        assert feeder.wait_for(lambda: samples(r, settings, "tiny"))
    got = samples(r, settings, "tiny")[0]
    assert got["app"] == batch.items[0].app and 0.0 < float(got["exec_s"]) < 1.0  # type: ignore[arg-type]


def test_a_budget_of_zero_runs_nothing_again(settings: Settings, feeder, serve, r) -> None:
    batch, _ = feeder.batch(4)
    with serve(rerun_budget=0.0):
        feeder.send(batch)
        assert len(feeder.results(4)) == 4
        feeder.wait_for(lambda: False, timeout=0.6)  # idle spells in which a re-run would have come
    assert samples(r, settings, "tiny") == []


def test_applications_take_turns_and_each_keeps_its_newest_request(settings: Settings, feeder, runners, r) -> None:
    clock = Clock()
    reruns = IdleReruns(r, settings.namespace, budget=0.4, burst_s=1.0, min_gap_s=0.0, clock=clock)
    batches = [with_apps(feeder.batch(2)[0], [app, app]) for app in ("chat", "code", "chat")]
    for b in batches:
        reruns.offer(b)  # chat again: its newest request is the third batch's, and its turn comes last
    assert [(k.item.app, k.item.job_id) for k in reruns._kept.values()] == [
        ("code", batches[1].items[1].job_id), ("chat", batches[2].items[1].job_id)]
    for _ in range(2):
        clock.t += 10.0
        assert reruns.run_one(runners) is not None
    assert [s["app"] for s in samples(r, settings, "tiny")] == ["code", "chat"]
    assert reruns.run_one(runners) is None  # nothing kept any more
    assert reruns.recorded == 2 and reruns.dropped == 0


def test_the_budget_spaces_the_reruns_by_their_own_cost(settings: Settings, feeder, zoo, tmp_path: Path, r) -> None:
    clock = Clock()
    cache = RunnerCache(zoo, device="cpu", data_dir=tmp_path)
    cache.get("tiny", "slow")  # sleeps 0.3 s a run
    reruns = IdleReruns(r, settings.namespace, budget=0.1, burst_s=0.05, min_gap_s=0.05, clock=clock)
    batch, _ = feeder.batch(1, variant="slow")
    reruns.offer(batch)
    assert reruns.due() and reruns.run_one(cache) is not None
    reruns.offer(batch)
    assert not reruns.due()
    # the debt of one 0.3 s run at a tenth of the time: about 3 s before the next
    assert reruns.wait_s(60.0) == pytest.approx(reruns.spent_s / 0.1, rel=1e-6)
    assert reruns.wait_s(0.25) == 0.25  # the worker still looks at its queue that often
    clock.t += reruns.spent_s / 0.1 + 1e-6
    assert reruns.due()


def test_nothing_is_loaded_for_a_rerun(settings: Settings, feeder, zoo, runners, r) -> None:
    reruns = IdleReruns(r, settings.namespace, budget=0.4, min_gap_s=0.0, clock=Clock())
    batch, _ = feeder.batch(1, variant="nospec")  # never loaded in this cache
    reruns.offer(batch)
    loads = list(zoo.loads)
    assert reruns.run_one(runners) is None
    assert zoo.loads == loads and samples(r, settings, "tiny") == []


def test_a_server_that_is_away_loses_the_sample_only(settings: Settings, feeder, runners) -> None:
    gone = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    reruns = IdleReruns(gone, settings.namespace, budget=0.4, min_gap_s=0.0, clock=Clock())
    batch, _ = feeder.batch(1)
    reruns.offer(batch)
    assert reruns.run_one(runners) is not None
    assert reruns.dropped == 1 and reruns.recorded == 0


def test_bad_settings_are_refused(r, settings: Settings) -> None:
    with pytest.raises(ValueError, match="budget"):
        IdleReruns(r, settings.namespace, budget=1.5)


def test_a_generation_request_runs_alone_with_its_own_settings(settings: Settings) -> None:
    """A re-run of a generation request generates its own ``max_new_tokens``, not the model's
    default: the applications of a language model differ by exactly that."""
    from adaserve.workers.runtime import available_models, load_runner

    if "ee-lm-xs" not in available_models(settings.data_dir):
        pytest.skip("ee-lm-xs is not available")
    runner = load_runner("ee-lm-xs", "default", "cpu", settings.data_dir)
    item = BatchItem(job_id="j", request_id="r0", app="long", reply_to="c",
                     inputs={"tokens": Tensor.from_numpy(np.arange(3, 15, dtype=np.int64))},
                     submitted_ms=0.0, deadline_ms=1e12, kind="generate",
                     generation=Generation(max_new_tokens=29, temperature=0.5, seed=7))
    inputs = inputs_alone(item, runner)
    assert inputs["tokens"].shape == (1, 12) and inputs["tokens"][0, 0] == 3
    assert inputs["max_new_tokens"].tolist() == [29]
    assert inputs["temperature"].tolist() == [0.5] and inputs["seed"].tolist() == [7]
    assert runner.max_new_tokens != 29  # the default the old re-run generated
