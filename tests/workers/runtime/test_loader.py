from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from adaserve.broker.errors import DeviceUnavailable, InvalidArgument, ModelLoadError, ModelNotFound
from adaserve.models.registry import built_dir, zoo_dir
from adaserve.workers.runtime import available_models, load_runner


def test_available_models_include_the_shipped_ones(tmp_path: Path) -> None:
    assert "fsdd-cnn" in available_models(tmp_path)


def test_runner_attributes(tmp_path: Path) -> None:
    runner = load_runner("fsdd-cnn", "default", "cpu", tmp_path, threads=1)
    assert (runner.model, runner.variant, runner.device, runner.inputs) == (
        "fsdd-cnn", "default", "cpu", ("audio",))


def test_unknown_model_and_variant(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFound):
        load_runner("no-such-model", "default", "cpu", tmp_path)
    with pytest.raises(ModelNotFound, match="no variant"):
        load_runner("fsdd-cnn", "exit9", "cpu", tmp_path)


def test_bad_device(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="device"):  # also a ValueError, as it was
        load_runner("fsdd-cnn", "default", "tpu", tmp_path)


def test_a_gpu_that_is_not_there_is_device_unavailable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from adaserve.workers.runtime import base

    monkeypatch.setattr(base, "gpu_present", lambda: False)
    with pytest.raises(DeviceUnavailable, match="no CUDA provider or no visible GPU"):
        base.choose_providers("gpu")
    assert "no visible GPU" in (base.gpu_unavailable() or "")
    with pytest.raises(ModelLoadError, match="fsdd-cnn/default on gpu: device 'gpu' asked for"):
        load_runner("fsdd-cnn", "default", "gpu", tmp_path)


def test_tampered_or_missing_artifact_is_refused(tmp_path: Path) -> None:
    built = built_dir("fsdd-cnn", tmp_path)
    shutil.copytree(zoo_dir() / "fsdd-cnn", built)
    artifact = built / "fsdd-cnn.onnx"
    artifact.write_bytes(artifact.read_bytes() + b"\0")
    with pytest.raises(ModelNotFound, match="hash"):
        load_runner("fsdd-cnn", "default", "cpu", tmp_path)
    artifact.unlink()
    with pytest.raises(ModelNotFound, match="missing"):
        load_runner("fsdd-cnn", "default", "cpu", tmp_path)
