from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from adaserve.broker.errors import ModelNotFound
from adaserve.models.manifest import (
    InputSpec,
    ModelInfo,
    VariantInfo,
    artifact_hashes,
    read_manifest,
    verify_hashes,
    write_manifest,
)


def info(**kw: object) -> ModelInfo:
    v = VariantInfo(name="audio", kind="modality-subset", artifacts=["a.onnx"],
                    inputs={"audio": InputSpec(shape=(1, 32, 32), dtype="float32")},
                    metric="accuracy", quality=0.9)
    base = dict(name="m", family="f", task="t", description="d", default_variant="audio",
                variants=[v], train={"seed": 0}, versions={"torch": "x"}, source="s")
    return ModelInfo(**{**base, **kw})  # type: ignore[arg-type]


def test_round_trip_and_hashes(tmp_path: Path) -> None:
    (tmp_path / "a.onnx").write_bytes(b"abc")
    m = info()
    m = m.model_copy(update={"hashes": artifact_hashes(tmp_path, m)})
    write_manifest(tmp_path, m)
    back = read_manifest(tmp_path)
    assert back == m
    assert back.variants[0].inputs["audio"].shape == (1, 32, 32)
    assert verify_hashes(tmp_path, back) == []
    (tmp_path / "a.onnx").write_bytes(b"abd")
    assert verify_hashes(tmp_path, back) == ["a.onnx"]


def test_variant_lookup() -> None:
    m = info()
    assert m.variant("default").name == "audio"
    assert m.variant("audio").kind == "modality-subset"
    with pytest.raises(ModelNotFound, match="no variant"):
        m.variant("image")


def test_schema_is_strict(tmp_path: Path) -> None:
    with pytest.raises(ValidationError):
        VariantInfo(name="x", kind="bogus", artifacts=[], inputs={})  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        info(unexpected=1)
    with pytest.raises(ModelNotFound):
        read_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text('{"name": "m"}')
    with pytest.raises(ModelNotFound, match="not a valid manifest"):
        read_manifest(tmp_path)
