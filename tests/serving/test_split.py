"""Split placement through the real pipeline: effnet-lite0 part 1 on pool ``a``, the intermediate
tensor forwarded to pool ``b`` for part 2, against the whole model on the bundled photos."""

from __future__ import annotations

import numpy as np
import pytest
import redis

from adaserve.broker import Keys, Settings, decode
from adaserve.broker.events import BatchFinished
from adaserve.models.datasets import sample_inputs
from adaserve.models.effnet.photos import PHOTOS
from adaserve.planner.config import PlannerConfig
from adaserve.producers import Client, make_job

pytestmark = pytest.mark.slow
MODEL = "effnet-lite0"
SPLIT = PlannerConfig(max_batch=32, split=(f"{MODEL}=a:b",))


def _photos() -> tuple[list[dict[str, np.ndarray]], np.ndarray]:
    return sample_inputs(MODEL, len(PHOTOS), seed=0)


def _events(r: redis.Redis[bytes], settings: Settings) -> list[BatchFinished]:
    evs = (decode(f[b"m"]) for _, f in r.xrange(Keys(settings.namespace).telemetry))
    return [e for e in evs if isinstance(e, BatchFinished)]


def test_split_gives_the_whole_models_labels_and_frees_the_first_slot(
        effnet_settings: Settings, r: redis.Redis[bytes], pipeline) -> None:
    images, _ = _photos()
    # Pool a has more free slots, so an idle planner sends each job there: part 1 runs on a.
    with pipeline({"a": (MODEL,), "b": (MODEL,)}, SPLIT, settings_=effnet_settings, slots={"a": 3, "b": 1}), \
            Client(effnet_settings) as c:
        split = c.submit(make_job(MODEL, images, 60_000)).result(120)
    with pipeline({"cpu": (MODEL,)}, settings_=effnet_settings), Client(effnet_settings) as c:
        whole = c.submit(make_job(MODEL, images, 60_000)).result(120)
    assert split.ok and whole.ok, (split.reasons, whole.reasons)
    assert split.predictions == whole.predictions
    for s, w in zip(split.results, whole.results):
        # The intermediate travels as float16 (the build's check passed: extra["fp16_ok"], 8.6e-5 on
        # these photos' probabilities, at most 0.01 allowed).
        assert s.confidence == pytest.approx(w.confidence, abs=1e-3)
        np.testing.assert_allclose(s.outputs["probs"].to_numpy(), w.outputs["probs"].to_numpy(), atol=1e-3)
        place = s.plan.placement
        assert (s.plan.variant, place.pool, place.part, place.prev_pool) == ("part2", "b", 2, "a")
        assert w.plan.variant == "default" and w.plan.placement.part is None
    k = Keys(effnet_settings.namespace)
    for pool in ("a", "b"):  # every batch acked: nothing pending, nothing left to read
        group = next(g for g in r.xinfo_groups(k.batches(pool)) if g["name"] in (pool, pool.encode()))
        assert group["pending"] == 0 and group["lag"] == 0
    first = [e for e in _events(r, effnet_settings) if e.pool == "a"]
    second = [e for e in _events(r, effnet_settings) if e.pool == "b"]
    assert [e.variant for e in first] == ["part1"] and first[0].size == len(images)
    assert first[0].items == []  # its requests end (and are counted) after part 2
    assert [e.variant for e in second] == ["part2"] and second[0].batch_id == f"{first[0].batch_id}.0"
    assert [i.status for i in second[0].items] == ["completed"] * len(images)


def test_without_the_option_the_whole_model_runs_on_either_pool(effnet_settings: Settings, pipeline) -> None:
    images, _ = _photos()
    with pipeline({"a": (MODEL,), "b": (MODEL,)}, settings_=effnet_settings), Client(effnet_settings) as c:
        res = c.submit(make_job(MODEL, images[:2], 60_000)).result(120)
    assert res.ok
    assert all(x.plan.variant == "default" and x.plan.placement.next_pool is None for x in res.results)


def test_a_split_to_a_pool_without_the_model_falls_back_to_the_whole(
        effnet_settings: Settings, r: redis.Redis[bytes], pipeline) -> None:
    images, _ = _photos()
    config = PlannerConfig(max_batch=32, split=(f"{MODEL}=a:nowhere",))
    with pipeline({"a": (MODEL,)}, config, settings_=effnet_settings), Client(effnet_settings) as c:
        res = c.submit(make_job(MODEL, images[:2], 60_000)).result(120)
    assert res.ok and all(x.plan.variant == "default" for x in res.results)
    assert not r.exists(Keys(effnet_settings.namespace).batches("nowhere"))
