"""av-video: the shipped subsets have the cost structure MOSEL needs (a cheap modality carrying
most of the accuracy, a far costlier one adding a few points), on held-out data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from rich.progress import Progress
from torch import nn

from adaserve.models import datasets
from adaserve.models.av_video import AvVideo
from adaserve.models.manifest import read_manifest, verify_hashes
from adaserve.models.registry import build_model, zoo_dir
from adaserve.workers.runtime import load_runner

NO_DATA = Path("/nonexistent-data-dir")


@pytest.fixture(scope="module")
def shipped_accuracy() -> dict[str, float]:
    test = datasets.load_av_video("test")
    feeds = {"audio": test.audio, "video": test.video}
    out = {}
    for variant in ("audio", "video", "audio+video"):
        runner = load_runner("av-video", variant, "cpu", NO_DATA, threads=1)
        out[variant] = float(np.mean(runner.run(feeds).predictions == test.labels))
    return out


def test_shipped_manifest_has_one_variant_per_subset() -> None:
    model_dir = zoo_dir() / "av-video"
    info = read_manifest(model_dir)
    assert info.train["tiny"] is False and info.default_variant == "audio+video"
    assert verify_hashes(model_dir, info) == []
    by_name = {v.name: v for v in info.variants}
    assert set(by_name) == {"audio", "video", "audio+video"}
    assert all(v.kind == "modality-subset" for v in info.variants)
    assert set(by_name["audio+video"].inputs) == {"audio", "video"}
    assert by_name["video"].inputs["video"].shape == (datasets.VIDEO_FRAMES, 8, 8)


def test_held_out_accuracy_has_the_papers_order(shipped_accuracy: dict[str, float]) -> None:
    acc = shipped_accuracy
    # The cheap modality alone carries most of the accuracy; the costly one adds a few points;
    # the costly one alone is the weakest (so it is never worth choosing on its own).
    assert acc["video"] < acc["audio"] < acc["audio+video"]
    assert acc["audio"] >= 0.9 * acc["audio+video"]
    assert 0.02 <= acc["audio+video"] - acc["audio"] <= 0.1
    info = read_manifest(zoo_dir() / "av-video")
    for v in info.variants:
        assert acc[v.name] == pytest.approx(v.quality, abs=1e-6)


def _macs_per_request(net: nn.Module, *xs: torch.Tensor) -> int:
    """Multiply-accumulates of one forward pass over a batch of one (convolutions and linears)."""
    total = 0

    def hook(mod: nn.Module, _inp: tuple[torch.Tensor, ...], out: torch.Tensor) -> None:
        nonlocal total
        if isinstance(mod, nn.Conv2d):
            k = mod.in_channels // mod.groups * mod.kernel_size[0] * mod.kernel_size[1]
            total += out.numel() * k
        elif isinstance(mod, nn.Linear):
            total += out.numel() * mod.in_features

    handles = [m.register_forward_hook(hook) for m in net.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    with torch.no_grad():
        net(*xs)
    for h in handles:
        h.remove()
    return total


def test_the_video_encoder_costs_over_ten_times_the_audio_encoder() -> None:
    net = AvVideo().eval()
    audio = _macs_per_request(net.audio, torch.zeros(1, 1, 32, 32))
    video = _macs_per_request(net.video, torch.zeros(1, datasets.VIDEO_FRAMES, 8, 8))
    assert video >= 10 * audio > 0


def test_audio_subset_does_not_contain_the_frame_encoder() -> None:
    def convs(name: str) -> int:
        graph = onnx.load(str(zoo_dir() / "av-video" / name)).graph
        return sum(node.op_type == "Conv" for node in graph.node)

    assert convs("audio_video.onnx") == convs("audio.onnx") + convs("video.onnx")
    assert 0 < convs("audio.onnx") and 0 < convs("video.onnx")


def test_clips_share_one_image_and_differ_by_noise() -> None:
    rng = np.random.default_rng(0)
    clips = datasets.video_clips(np.array([3, 7]), "test", rng, frames=5)
    assert clips.shape == (2, 5, 8, 8) and clips.dtype == np.float32
    assert 0.0 <= clips.min() and clips.max() <= 1.0
    assert not np.allclose(clips[0, 0], clips[0, 1])
    a, b = datasets.load_av_video("test"), datasets.load_av_video("test")
    assert np.array_equal(a.video, b.video) and np.array_equal(a.audio, b.audio)


def test_tiny_build_serves_each_subset(tmp_path: Path) -> None:
    with Progress(disable=True) as progress:
        info = build_model("av-video", tmp_path / "models" / "av-video", tiny=True, seed=0,
                           progress=progress)
    assert info.train["tiny"] is True
    test = datasets.load_av_video("test")
    runner = load_runner("av-video", "audio", "cpu", tmp_path, threads=1)
    assert runner.inputs == ("audio",)
    assert runner.run({"audio": test.audio[:5]}).predictions.shape == (5,)  # no video needed
    runner = load_runner("av-video", "default", "cpu", tmp_path, threads=1)
    assert runner.variant == "audio+video"
