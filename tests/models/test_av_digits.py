from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from rich.progress import Progress

from adaserve.models.av_digits import AvDigits
from adaserve.models.datasets import load_av_digits
from adaserve.models.manifest import read_manifest
from adaserve.models.registry import build_model, zoo_dir
from adaserve.workers.runtime import load_runner

NO_DATA = Path("/nonexistent-data-dir")


@pytest.fixture(scope="module")
def shipped_accuracy() -> dict[str, float]:
    test = load_av_digits("test")
    feeds = {"audio": test.audio, "image": test.image}
    out = {}
    for variant in ("audio", "image", "audio+image"):
        runner = load_runner("av-digits", variant, "cpu", NO_DATA, threads=1)
        out[variant] = float(np.mean(runner.run(feeds).predictions == test.labels))
    return out


def test_shipped_manifest_has_one_variant_per_subset() -> None:
    info = read_manifest(zoo_dir() / "av-digits")
    assert info.train["tiny"] is False and info.default_variant == "audio+image"
    by_name = {v.name: v for v in info.variants}
    assert set(by_name) == {"audio", "image", "audio+image"}
    assert all(v.kind == "modality-subset" for v in info.variants)
    assert set(by_name["audio"].inputs) == {"audio"}
    assert set(by_name["image"].inputs) == {"image"}
    assert set(by_name["audio+image"].inputs) == {"audio", "image"}
    assert by_name["image"].inputs["image"].shape == (1, 8, 8)


def test_shipped_accuracy_floors(shipped_accuracy: dict[str, float]) -> None:
    acc = shipped_accuracy
    assert acc["audio+image"] >= 0.90
    assert acc["audio"] >= acc["image"] + 0.10
    assert acc["audio+image"] > acc["audio"]
    info = read_manifest(zoo_dir() / "av-digits")
    for v in info.variants:
        assert acc[v.name] == pytest.approx(v.quality, abs=1e-6)


def test_image_subset_does_not_contain_the_audio_cnn() -> None:
    def convs(name: str) -> int:
        graph = onnx.load(str(zoo_dir() / "av-digits" / name)).graph
        return sum(node.op_type == "Conv" for node in graph.node)

    assert convs("image.onnx") == 0
    assert convs("audio.onnx") == convs("audio_image.onnx") > 0


def test_subset_equals_masked_forward() -> None:
    torch.manual_seed(0)
    net = AvDigits().eval()
    audio, image = torch.rand(4, 1, 32, 32), torch.rand(4, 1, 8, 8)
    with torch.no_grad():
        for mask, a, i in (([1.0, 0.0], audio, None), ([0.0, 1.0], None, image),
                           ([1.0, 1.0], audio, image)):
            full = net(audio, image, torch.tensor([mask] * 4))
            assert torch.allclose(net.subset(a, i), full, atol=1e-6)


def test_tiny_build_serves_each_subset(tmp_path: Path) -> None:
    with Progress(disable=True) as progress:
        info = build_model("av-digits", tmp_path / "models" / "av-digits", tiny=True, seed=0,
                           progress=progress)
    assert info.train["tiny"] is True
    test = load_av_digits("test")
    runner = load_runner("av-digits", "image", "cpu", tmp_path, threads=1)
    assert runner.inputs == ("image",)
    out = runner.run({"image": test.image[:5]})  # no audio needed
    assert out.predictions.shape == (5,)
    runner = load_runner("av-digits", "default", "cpu", tmp_path, threads=1)
    assert runner.variant == "audio+image"
