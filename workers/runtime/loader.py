"""Finds a model's built artifacts and returns the runtime that serves a variant.

Dispatch is on the variant's kind: ONNX runners here for ``whole``, ``modality-subset`` and
``exit``; helper modules for ``lm-exit`` (``lm.LmRunner``) and ``part`` (``parts.PartRunner``),
imported only when asked for so that a worker that serves ONNX models never imports torch.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from adaserve.broker.errors import InvalidArgument, ModelLoadError, ModelNotFound
from adaserve.models.manifest import sha256
from adaserve.models.registry import list_models, load_info
from adaserve.workers.runtime.base import Runner

DEVICES = ("cpu", "gpu")
EXTERNAL_RUNNERS = {
    "lm-exit": ("adaserve.workers.runtime.lm", "LmRunner"),
    "part": ("adaserve.workers.runtime.parts", "PartRunner"),
}


def available_models(data_dir: Path) -> list[str]:
    """Names of the models whose artifacts are built (in ``data_dir``) or shipped."""
    return [info.name for _, info in list_models(data_dir)]


def load_runner(model: str, variant: str, device: str, data_dir: Path, *,
                threads: int | None = None, io_binding: bool = False) -> Runner:
    """Load ``model``/``variant`` on ``device`` (``cpu`` or ``gpu``); ``ModelNotFound`` if unbuilt.

    ``threads`` sizes onnxruntime's intra-op pool on the CPU (default: the CPUs this process may
    use). ``io_binding`` (ONNX variants on the GPU): device input buffers kept and refilled, see
    ``bound`` (off by default: slower for the zoo's models, ``adaserve bench gpu``). Artifacts
    whose sha256 differs from the manifest's are refused.
    """
    if device not in DEVICES:
        raise InvalidArgument(f"device must be one of {DEVICES}, got {device!r}")
    model_dir, info = load_info(model, data_dir)
    var = info.variant(variant)
    for rel in var.artifacts:
        path = model_dir / rel
        if not path.is_file():
            raise ModelNotFound(f"{model}/{var.name}: artifact {path} is missing")
        expected = info.hashes.get(rel)
        if expected is not None and sha256(path) != expected:
            raise ModelNotFound(f"{model}/{var.name}: {path} does not match its manifest hash")
    if var.kind in ("whole", "modality-subset", "exit"):
        from adaserve.workers.runtime.onnx import EarlyExitRunner, OnnxRunner

        cls = EarlyExitRunner if var.kind == "exit" else OnnxRunner
        try:
            return cls(model_dir, info, var, device, threads, io_binding)
        except RuntimeError as exc:  # no CUDA provider or GPU, or an unreadable graph
            raise ModelLoadError(f"{model}/{var.name} on {device}: {exc}") from exc
    module_name, cls_name = EXTERNAL_RUNNERS[var.kind]
    try:
        cls = getattr(importlib.import_module(module_name), cls_name)
    except (ModuleNotFoundError, AttributeError) as exc:
        raise ModelNotFound(f"{model}/{var.name}: no runtime for kind {var.kind!r} "
                            f"({module_name}.{cls_name}: {exc})") from exc
    if var.kind == "part":
        return cls(model_dir, info, var, device, threads, io_binding)
    return cls(model_dir, info, var, device, threads)
