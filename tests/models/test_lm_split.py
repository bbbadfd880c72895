"""ee-lm-s-split: the transformer case of the split rule; parts chained equal the whole model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from rich.progress import Progress

from adaserve.models.manifest import verify_hashes
from adaserve.workers.runtime.parts import PartRunner


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from adaserve.models.registry import build_model

    out = tmp_path_factory.mktemp("lm-split") / "models" / "ee-lm-s-split"  # a data dir's layout
    with Progress(disable=True) as progress:
        build_model("ee-lm-s-split", out, tiny=True, seed=0, progress=progress)
    return out


def test_parts_chained_equal_the_whole_on_held_out_windows(built: Path) -> None:
    import onnxruntime as ort

    from adaserve.models.lm.split import held_out
    from adaserve.models.manifest import read_manifest

    info = read_manifest(built)
    assert verify_hashes(built, info) == []
    p1 = PartRunner(built, info, info.variant("part1"), "cpu")
    p2 = PartRunner(built, info, info.variant("part2"), "cpu")
    tokens = held_out(50)
    whole = ort.InferenceSession(str(built / "whole.onnx")).run(None, {"tokens": tokens})[0]
    mid = p1.run({"tokens": tokens}).outputs["intermediate"]
    extra = info.variant("part1").extra
    assert extra["split_after"] == "block4.attn" and 0.05 <= extra["tail_share"] <= 0.15
    assert mid.dtype == np.dtype(extra.get("intermediate_dtype", "float32"))
    chained = p2.run({"intermediate": mid})
    assert (chained.predictions == whole.argmax(1)).all()
    exact = ort.InferenceSession(str(built / "part2.onnx")).run(
        None, {"intermediate": ort.InferenceSession(str(built / "part1.onnx")).run(None, {"tokens": tokens})[0]})[0]
    assert np.abs(exact - whole).max() <= 1e-4
    assert info.variant("whole").quality is not None and info.variant("whole").quality > 0.3


def test_the_profiler_measures_each_part_and_scores_the_last(built: Path) -> None:
    from adaserve.profiling.measure import MeasureConfig
    from adaserve.profiling.run import measure_model_variant

    cfg = MeasureConfig(batch_sizes=(1, 2), repeats=1, warmup=1, quality_samples=16)
    p1 = measure_model_variant("ee-lm-s-split", "part1", "cpu", built.parent.parent, cfg)
    p2 = measure_model_variant("ee-lm-s-split", "part2", "cpu", built.parent.parent, cfg)
    assert [(x.batch_size, x.out_bytes) for x in p1.parts] == [(1, 32 * 128 * 2), (2, 2 * 32 * 128 * 2)]  # float16
    assert p1.quality == [] and len(p2.quality) == 1 and 0.2 <= p2.quality[0].value <= 1.0
