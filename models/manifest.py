"""The manifest of a built model: what its variants are, where their files lie, how good they are.

Written as ``manifest.json`` next to the artifacts by ``adaserve models build`` and read by the
runtime loader, the profiler and ``adaserve models list``. Artifact paths are relative to the
model's directory so that a built model can be moved (or shipped in the package) as one folder.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
)

from adaserve.broker.errors import ModelNotFound

MANIFEST = "manifest.json"
VariantKind = Literal["whole", "modality-subset", "exit", "lm-exit", "part"]


class Normalize(BaseModel):
    """How a float input is made from ``uint8`` pixels: ``(pixel * scale - mean) / std``.

    ``mean`` and ``std`` hold one value, or one per channel (the first per-sample axis).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    mean: tuple[float, ...] = Field(min_length=1)
    std: tuple[float, ...] = Field(min_length=1)
    scale: float = Field(default=1.0, gt=0)

    @field_validator("std")
    @classmethod
    def _positive(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        if any(s <= 0 for s in v):
            raise ValueError("every std must be > 0")
        return v

    def apply(self, pixels: np.ndarray, dtype: str) -> np.ndarray:
        """``pixels`` [B, C, ...] as uint8 -> the normalised float array the model takes."""
        shape = (1, -1) + (1,) * (pixels.ndim - 2)
        mean = np.asarray(self.mean, dtype=np.float32).reshape(shape)
        std = np.asarray(self.std, dtype=np.float32).reshape(shape)
        x = pixels.astype(np.float32)
        if self.scale != 1.0:
            x *= np.float32(self.scale)
        return np.ascontiguousarray((x - mean) / std, dtype=dtype)


class InputSpec(BaseModel):
    """One input of a variant, per sample (without the batch axis). ``normalize``: the input may
    also come as ``uint8`` pixels of the same shape, normalised by the worker (a quarter of the bytes)."""

    model_config = ConfigDict(extra="forbid")

    shape: tuple[int, ...]
    dtype: str
    normalize: Normalize | None = None

    @model_serializer(mode="wrap")
    def _drop_no_normalize(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Manifests written before ``normalize`` existed keep their exact bytes when rebuilt.
        out: dict[str, Any] = handler(self)
        if out.get("normalize") is None:
            out.pop("normalize", None)
        return out


class VariantInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    kind: VariantKind
    artifacts: list[str]
    inputs: dict[str, InputSpec]
    metric: Literal["accuracy", "perplexity"] | None = None
    quality: float | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


class ModelInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    family: str
    task: str
    description: str
    labels: list[str] | None = None
    default_variant: str
    variants: list[VariantInfo]
    train: dict[str, Any]
    versions: dict[str, str]
    hashes: dict[str, str] = Field(default_factory=dict)
    source: str

    def variant(self, name: str) -> VariantInfo:
        """The variant called ``name`` (``"default"`` means ``default_variant``)."""
        wanted = self.default_variant if name == "default" else name
        for v in self.variants:
            if v.name == wanted:
                return v
        known = ", ".join(v.name for v in self.variants)
        raise ModelNotFound(f"model {self.name!r} has no variant {name!r} (has: {known})")


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def artifact_hashes(model_dir: Path, info: ModelInfo) -> dict[str, str]:
    """sha256 of every artifact any variant names, keyed by its relative path."""
    paths = sorted({a for v in info.variants for a in v.artifacts})
    return {p: sha256(model_dir / p) for p in paths}


def write_manifest(model_dir: Path, info: ModelInfo) -> Path:
    path = model_dir / MANIFEST
    path.write_text(json.dumps(info.model_dump(mode="json"), indent=2, sort_keys=False) + "\n")
    return path


def read_manifest(model_dir: Path) -> ModelInfo:
    """The manifest in ``model_dir``; ``ModelNotFound`` when it is missing or does not validate."""
    path = model_dir / MANIFEST
    if not path.is_file():
        raise ModelNotFound(f"no {MANIFEST} in {model_dir}")
    try:
        return ModelInfo.model_validate_json(path.read_text())
    except ValidationError as exc:
        raise ModelNotFound(f"{path} is not a valid manifest: {exc}") from exc


def verify_hashes(model_dir: Path, info: ModelInfo) -> list[str]:
    """Relative paths of artifacts that are missing or differ from the manifest's hashes."""
    bad = []
    for rel, digest in info.hashes.items():
        p = model_dir / rel
        if not p.is_file() or sha256(p) != digest:
            bad.append(rel)
    return bad
