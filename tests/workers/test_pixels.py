"""uint8 images normalised on the worker (InputSpec.normalize): same outputs as float32 normalised
ones, at a quarter of the bytes; admitted by the planner only where the manifest declares it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from adaserve.broker import Tensor
from adaserve.broker.errors import InvalidMessage
from adaserve.models.chain import export
from adaserve.models.manifest import InputSpec, ModelInfo, Normalize, VariantInfo
from adaserve.planner.validate import _check_tensor
from adaserve.workers.inputs import InputError, gather, pixel_inputs, signature, specs_of, targets
from adaserve.workers.runtime.onnx import check_inputs
from adaserve.workers.runtime.parts import PartRunner

NORM = Normalize(mean=(120.0, 110.0, 100.0), std=(60.0, 61.0, 62.0), scale=1.0)
SPEC = InputSpec(shape=(3, 8, 8), dtype="float32", normalize=NORM)


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ModelInfo]:
    torch.manual_seed(0)
    first = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU6()).eval()
    second = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 5)).eval()
    out = tmp_path_factory.mktemp("pixels")
    x = torch.randn(2, 3, 8, 8)
    export(first, x, out / "part1.onnx", "image", "intermediate")
    export(second, first(x), out / "part2.onnx", "intermediate", "logits")
    info = ModelInfo(
        name="toy", family="toy", task="image-classification", description="toy", default_variant="part1",
        train={}, versions={}, source="random weights",
        variants=[VariantInfo(name="part1", kind="part", artifacts=["part1.onnx"], inputs={"image": SPEC},
                              extra={"part": 1, "next": "part2", "intermediate_dtype": "float16"}),
                  VariantInfo(name="part2", kind="part", artifacts=["part2.onnx"],
                              inputs={"intermediate": InputSpec(shape=(4, 8, 8), dtype="float32")}, extra={"part": 2})])
    return out, info


def _pixels(n: int) -> np.ndarray:
    return np.random.default_rng(3).integers(0, 256, size=(n, 3, 8, 8), dtype=np.uint8)


def test_uint8_gives_the_outputs_of_float32_normalised_inputs(toy: tuple[Path, ModelInfo]) -> None:
    model_dir, info = toy
    p1 = PartRunner(model_dir, info, info.variant("part1"), "cpu")
    u8 = _pixels(6)
    mean = np.array(NORM.mean, np.float32).reshape(1, 3, 1, 1)
    std = np.array(NORM.std, np.float32).reshape(1, 3, 1, 1)
    floats = ((u8.astype(np.float32) - mean) / std).astype(np.float32)
    a = p1.run({"image": u8}).outputs["intermediate"]
    b = p1.run({"image": floats}).outputs["intermediate"]
    assert a.dtype == np.float16 and np.array_equal(a, b)
    assert u8.nbytes * 4 == floats.nbytes


def test_the_worker_keeps_uint8_for_a_normalised_input_and_refuses_it_otherwise(toy: tuple[Path, ModelInfo]) -> None:
    model_dir, info = toy
    runner = PartRunner(model_dir, info, info.variant("part1"), "cpu")
    rows = [{"image": Tensor.from_numpy(p)} for p in _pixels(3)]
    sig = signature(rows[0], ("image",))
    specs = specs_of(runner)
    assert pixel_inputs(runner) == frozenset({"image"})
    target = targets(sig, specs, pixel_inputs(runner))
    assert target == {"image": ((3, 8, 8), "uint8")}
    batch = gather(rows, sig, target)
    assert batch["image"].dtype == np.uint8
    np.testing.assert_array_equal(check_inputs(runner.specs, batch)["image"],
                                  NORM.apply(batch["image"], "float32"))
    with pytest.raises(InputError, match="uint8"):
        targets(sig, specs)  # a model without ``normalize`` does not take pixels


def test_the_planner_admits_pixels_only_where_declared() -> None:
    t = Tensor.from_numpy(_pixels(1)[0])
    _check_tensor("r1", "image", t, {"shape": [3, 8, 8], "dtype": "float32", "pixels": "uint8"})
    with pytest.raises(InvalidMessage, match="uint8"):
        _check_tensor("r1", "image", t, {"shape": [3, 8, 8], "dtype": "float32"})


def test_a_scale_and_one_mean_for_all_channels() -> None:
    n = Normalize(mean=(0.5,), std=(0.25,), scale=1 / 255)
    x = n.apply(np.full((1, 3, 2, 2), 255, np.uint8), "float32")
    np.testing.assert_allclose(x, 2.0, rtol=1e-6)


def test_a_zero_std_is_refused() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="std"):
        Normalize(mean=(1.0,), std=(0.0,))


def test_the_heartbeat_announces_pixels_for_a_normalised_input(toy: tuple[Path, ModelInfo]) -> None:
    from adaserve.workers.runners import RunnerCache

    model_dir, info = toy
    runner = PartRunner(model_dir, info, info.variant("part1"), "cpu")
    cache = RunnerCache(lambda *a, **k: runner, device="cpu", data_dir=model_dir)
    cache.loaded("toy", "part1")
    assert cache.inputs() == {"toy": {"image": {"shape": [3, 8, 8], "dtype": "float32", "pixels": "uint8"}}}
