from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from rich.progress import Progress

from adaserve.models.datasets import load_fsdd
from adaserve.models.manifest import read_manifest, verify_hashes
from adaserve.models.registry import build_model, zoo_dir
from adaserve.workers.runtime import load_runner


@pytest.fixture(scope="module")
def tiny_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("data")
    with Progress(disable=True) as progress:
        build_model("fsdd-cnn", data_dir / "models" / "fsdd-cnn", tiny=True, seed=0,
                    progress=progress)
    return data_dir


def test_tiny_build_writes_a_complete_manifest(tiny_build: Path) -> None:
    model_dir = tiny_build / "models" / "fsdd-cnn"
    info = read_manifest(model_dir)
    assert info.train["tiny"] is True and info.train["seed"] == 0
    assert info.train["build_seconds"] > 0
    assert set(info.versions) >= {"torch", "onnx", "onnxruntime"}
    assert list(info.hashes) == ["fsdd-cnn.onnx"] and verify_hashes(model_dir, info) == []
    (variant,) = info.variants
    assert (variant.name, variant.kind, variant.metric) == ("default", "whole", "accuracy")
    assert variant.inputs["audio"].shape == (1, 32, 32)
    assert 0.0 <= variant.quality <= 1.0


def test_tiny_build_serves_any_batch_size(tiny_build: Path) -> None:
    runner = load_runner("fsdd-cnn", "default", "cpu", tiny_build, threads=1)
    x = load_fsdd("test").audio
    for n in (1, 7):
        out = runner.run({"audio": x[:n]})
        assert out.predictions.shape == (n,) and out.outputs["logits"].shape == (n, 10)


def test_shipped_model_accuracy_floor() -> None:
    info = read_manifest(zoo_dir() / "fsdd-cnn")
    assert info.train["tiny"] is False
    test = load_fsdd("test")
    runner = load_runner("fsdd-cnn", "default", "cpu", Path("/nonexistent-data-dir"), threads=1)
    out = runner.run({"audio": test.audio})
    accuracy = float(np.mean(out.predictions == test.labels))
    assert accuracy >= 0.9
    assert accuracy == pytest.approx(info.variants[0].quality, abs=1e-6)
    assert np.allclose(out.confidences, out.outputs["probs"].max(axis=1))
