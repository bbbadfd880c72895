"""PartRunner: part 1 hands on its intermediate tensor, the last part returns what the whole model would."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch
from torch import nn

from adaserve.broker.errors import InvalidMessage, ModelNotFound
from adaserve.models.chain import export as export_onnx
from adaserve.models.manifest import InputSpec, ModelInfo, VariantInfo
from adaserve.workers.runtime.parts import PartRunner


@pytest.fixture(scope="module")
def split_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    first = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU6()).eval()
    second = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 5)).eval()
    out = tmp_path_factory.mktemp("split")
    x = torch.randn(2, 3, 8, 8)
    export_onnx(nn.Sequential(first, second), x, out / "whole.onnx", "image", "logits")
    export_onnx(first, x, out / "part1.onnx", "image", "intermediate")
    export_onnx(second, first(x), out / "part2.onnx", "intermediate", "logits")
    return out


def _info() -> ModelInfo:
    image = {"image": InputSpec(shape=(3, 8, 8), dtype="float32")}
    mid = {"intermediate": InputSpec(shape=(4, 8, 8), dtype="float32")}
    return ModelInfo(
        name="toy-split", family="toy", task="image-classification", description="toy",
        default_variant="whole", train={}, versions={}, source="random weights",
        variants=[VariantInfo(name="whole", kind="whole", artifacts=["whole.onnx"], inputs=image),
                  VariantInfo(name="part1", kind="part", artifacts=["part1.onnx"], inputs=image,
                              extra={"part": 1, "next": "part2"}),
                  VariantInfo(name="part2", kind="part", artifacts=["part2.onnx"], inputs=mid,
                              extra={"part": 2})])


def test_parts_chained_equal_the_whole(split_dir: Path) -> None:
    info = _info()
    p1 = PartRunner(split_dir, info, info.variant("part1"), "cpu")
    p2 = PartRunner(split_dir, info, info.variant("part2"), "cpu")
    assert not p1.is_last and p1.next == "part2" and p2.is_last
    x = np.random.default_rng(1).normal(size=(5, 3, 8, 8)).astype(np.float32)
    mid = p1.run({"image": x})
    assert set(mid.outputs) == {"intermediate"} and mid.outputs["intermediate"].shape == (5, 4, 8, 8)
    assert mid.predictions is None and mid.request_exec_s.shape == (5,)
    last = p2.run({"intermediate": mid.outputs["intermediate"]})
    whole = ort.InferenceSession(str(split_dir / "whole.onnx")).run(None, {"image": x})[0]
    assert np.abs(last.outputs["logits"] - whole).max() <= 1e-5
    assert last.predictions.tolist() == whole.argmax(1).tolist()
    assert ((last.confidences > 0) & (last.confidences <= 1)).all()


def test_bad_variant_and_missing_input(split_dir: Path, tmp_path: Path) -> None:
    info = _info()
    with pytest.raises(ValueError):
        PartRunner(split_dir, info, info.variant("whole"), "cpu")
    with pytest.raises(ModelNotFound):
        PartRunner(tmp_path, info, info.variant("part1"), "cpu")
    p2 = PartRunner(split_dir, info, info.variant("part2"), "cpu")
    with pytest.raises(InvalidMessage, match="intermediate"):
        p2.run({"image": np.zeros((1, 3, 8, 8), np.float32)})
