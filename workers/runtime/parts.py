"""Serving one part of a split model (the ``part`` variants, StarONNX-style placement).

Part 1 takes the model's input and returns the tensor it hands on as ``outputs["intermediate"]``
(float32, or float16 when the manifest says ``extra["intermediate_dtype"]``, [B, *shape of the next
part's input]); the planner forwards that to a worker that runs
the part named in ``extra["next"]``. The last part returns ``outputs["logits"]`` and ``["probs"]``
with top-1 ``predictions`` and their ``confidences``, exactly as the whole model's runner does.
Inputs are checked against the manifest (``InvalidMessage`` when they do not fit).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from adaserve.broker.errors import ModelLoadError, ModelNotFound
from adaserve.models.manifest import InputSpec, ModelInfo, VariantInfo
from adaserve.workers.runtime.base import RunOutput, SplitPart
from adaserve.workers.runtime.bound import runner_of
from adaserve.workers.runtime.onnx import check_inputs, make_session, softmax


class PartRunner(SplitPart):
    """onnxruntime session of one part; ``is_last`` when the part has no ``next``."""

    def __init__(self, model_dir: Path, info: ModelInfo, variant: VariantInfo, device: str,
                 threads: int | None = None, io_binding: bool = False) -> None:
        if variant.kind != "part" or len(variant.artifacts) != 1:
            raise ValueError(f"{info.name}/{variant.name} is not a part with one ONNX artifact")
        path = Path(model_dir) / variant.artifacts[0]
        if not path.is_file():
            raise ModelNotFound(f"missing artifact {path}")
        self.model, self.variant, self.device = info.name, variant.name, device
        self.inputs: tuple[str, ...] = tuple(variant.inputs)
        self.specs: dict[str, InputSpec] = variant.inputs
        self.part = int(variant.extra.get("part", 0))
        self.next: str | None = variant.extra.get("next")
        # The build's fp16 check passed (extra["fp16_ok"]): hand the intermediate on at half the bytes.
        self.wire_dtype = np.dtype(variant.extra.get("intermediate_dtype", "float32"))
        try:
            self.session = make_session(path, device, threads)
        except RuntimeError as exc:  # no CUDA provider or no GPU, or an unreadable graph
            raise ModelLoadError(f"{info.name}/{variant.name}: {exc}") from exc
        self._out = self.session.get_outputs()[0].name
        self._run = runner_of(self.session, device, io_binding)
        missing = {i.name for i in self.session.get_inputs()} - set(self.inputs)
        if missing:
            raise ModelLoadError(f"{path} expects inputs {sorted(missing)} the manifest does not list")

    def run(self, inputs: dict[str, np.ndarray]) -> RunOutput:
        feed = check_inputs(self.specs, inputs)
        b = next(iter(feed.values())).shape[0]
        t0 = time.perf_counter()
        out = self._run([self._out], feed)[0]
        elapsed = time.perf_counter() - t0
        exec_s = np.full(b, elapsed, dtype=np.float64)
        if not self.is_last:
            wire = out if out.dtype == self.wire_dtype else out.astype(self.wire_dtype)
            return RunOutput(outputs={"intermediate": wire}, request_exec_s=exec_s)
        probs = softmax(out)
        return RunOutput(outputs={"logits": out, "probs": probs}, predictions=probs.argmax(axis=1),
                         confidences=probs.max(axis=1), request_exec_s=exec_s)
