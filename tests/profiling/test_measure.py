"""measure_variant on real (tiny) models: latency per batch size, quality, histograms, parts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adaserve.broker.profiles import Profile
from adaserve.models.registry import list_models
from adaserve.profiling.measure import MeasureConfig, time_runs
from adaserve.profiling.run import measure_model_variant, profile_model

TINY = MeasureConfig(batch_sizes=(1, 3), repeats=2, warmup=1, quality_samples=8, hist_samples=8, hist_bins=4)


def test_config_rejects_bad_batch_sizes() -> None:
    with pytest.raises(ValueError):
        MeasureConfig(batch_sizes=(0, 4))
    with pytest.raises(ValueError):
        MeasureConfig(batch_sizes=(64,))
    with pytest.raises(ValueError):
        MeasureConfig(repeats=0)


def test_time_runs_counts_warmup_apart() -> None:
    class Counting:
        calls = 0

        def run(self, inputs: dict[str, np.ndarray]) -> None:
            Counting.calls += 1

    secs = time_runs(Counting(), {}, repeats=4, warmup=2)  # type: ignore[arg-type]
    assert secs.shape == (4,) and Counting.calls == 6 and (secs >= 0).all()


def test_language_model_depth(lm_data_dir: Path) -> None:
    stages: list[str] = []
    p = measure_model_variant("ee-lm-xs", "depth1", "cpu", lm_data_dir, TINY,
                              lambda done, total, stage: stages.append(stage))
    assert isinstance(p, Profile) and p.model == "ee-lm-xs"
    assert [(x.variant, x.device, x.batch_size) for x in p.latency] == [("depth1", "cpu", 1), ("depth1", "cpu", 3)]
    assert all(x.p50_ms > 0 and x.p90_ms >= x.p50_ms and x.repeats == 2 for x in p.latency)
    (q,) = p.quality
    assert q.metric == "perplexity" and 1.0 < q.value < 65.0 and q.n == 8 * 48
    assert p.exec_hist == [] and p.parts == []
    assert stages[0] == "loading" and stages[-1] == "done"
    assert p.host["device"] == "cpu"


def test_every_variant_of_a_model(lm_data_dir: Path) -> None:
    p = profile_model("ee-lm-xs", "cpu", lm_data_dir, TINY)
    assert {q.variant for q in p.quality} == {"depth1", "depth2", "early-exit"}
    assert p.latency_ms("depth2", "cpu", 3) is not None


def test_classifier_accuracy_and_exit_histogram(tmp_path: Path) -> None:
    """Audio models from the shipped zoo (skipped where the checkout ships none)."""
    shipped = {info.name: info for _, info in list_models(tmp_path)}
    if "ee-audio" in shipped:
        info = shipped["ee-audio"]
        dynamic = next(v for v in info.variants if v.kind == "exit" and "threshold" in v.extra)
        p = measure_model_variant("ee-audio", dynamic.name, "cpu", tmp_path, TINY)
        (h,) = p.exec_hist
        assert sum(h.counts) == 8 and len(h.edges_ms) == 5
        assert h.exits and abs(sum(h.exits.values()) - 1.0) < 1e-9
    elif "fsdd-cnn" in shipped:
        p = measure_model_variant("fsdd-cnn", shipped["fsdd-cnn"].default_variant, "cpu", tmp_path, TINY)
    else:
        pytest.skip("no shipped audio model in this checkout")
    (q,) = p.quality
    assert q.metric == "accuracy" and q.n == 8 and 0.5 <= q.value <= 1.0


@pytest.mark.slow
def test_split_model_parts(effnet_data_dir: Path) -> None:
    """Per-part latency and the size of the tensor each part hands on; accuracy of the chain."""
    cfg = MeasureConfig(batch_sizes=(1, 2), repeats=2, warmup=1, quality_samples=20)
    p1 = measure_model_variant("effnet-lite0", "part1", "cpu", effnet_data_dir, cfg)
    p2 = measure_model_variant("effnet-lite0", "part2", "cpu", effnet_data_dir, cfg)
    # the split rule's cut (after block 14: 192 x 7 x 7), handed on as float16 (the build's fp16 check passed)
    assert [(x.batch_size, x.out_bytes) for x in p1.parts] == [(1, 192 * 7 * 7 * 2), (2, 2 * 192 * 7 * 7 * 2)]
    assert [(x.batch_size, x.out_bytes) for x in p2.parts] == [(1, 1000 * 4), (2, 2000 * 4)]
    assert p1.quality == []
    (q,) = p2.quality
    assert q.metric == "accuracy" and q.n == 20 and q.value >= 0.9
