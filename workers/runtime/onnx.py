"""onnxruntime runners for the zoo's ONNX variants: whole models, modality subsets, early exits.

Outputs of every runner: ``logits`` and ``probs`` (softmax) per request; ``predictions`` is the
arg-max class and ``confidences`` its probability. ``request_exec_s`` is, per request, the time
from the start of the batch until that request's answer was known: the whole batch's time for a
static model, and the time up to its exit for an early-exit model.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from adaserve.broker.errors import DeviceUnavailable, InvalidMessage
from adaserve.models.manifest import InputSpec, ModelInfo, VariantInfo
from adaserve.workers.runtime.base import Runner, RunOutput, choose_providers
from adaserve.workers.runtime.bound import runner_of
from adaserve.workers.runtime.cpus import available_cpus

if TYPE_CHECKING:
    import onnxruntime as ort


def default_threads() -> int:
    """CPUs this process may run on (the container's share, not the host's count): its affinity,
    capped by the cgroup's CPU quota (compose's ``cpus:``)."""
    return available_cpus()


def make_session(path: Path, device: str, threads: int | None = None) -> ort.InferenceSession:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads or default_threads()
    # Batches of one model run one after another in a worker, so parallel graph branches buy nothing.
    opts.inter_op_num_threads = 1
    # Idle intra-op threads sleep instead of spin-waiting. A worker shares its cores with the
    # planner, the server and the producers: spinning made an ee-audio worker burn 1.3 of 2 cores
    # for 0.2 ms batches and starved the rest of the pipeline (finish rate 0.82 -> 0.98 at 700
    # requests/s with it off, docs/orloj.md "Live").
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(str(path), sess_options=opts, providers=choose_providers(device))
    # A CUDA provider that fails to load (a missing libcudnn, say) only logs a warning and leaves
    # the CPU provider: a "gpu" worker would then serve on the CPU without anyone noticing.
    if device == "gpu" and "CUDAExecutionProvider" not in session.get_providers():
        raise DeviceUnavailable(f"the CUDA provider did not load for {path.name} (onnxruntime's log says why; "
                           "CUDA 13 and cuDNN 9 libraries must be loadable)")
    return session


def softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def check_inputs(specs: dict[str, InputSpec], inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The inputs a variant takes, cast to their dtypes; extra modalities are ignored.

    ``InvalidMessage`` (reason ``schema``) when one is missing, batch sizes differ or a per-sample
    shape is not the manifest's.
    """
    out: dict[str, np.ndarray] = {}
    for name, spec in specs.items():
        if name not in inputs:
            raise InvalidMessage("schema", f"missing input {name!r} (needs {sorted(specs)})")
        arr = inputs[name]
        if spec.normalize is not None and arr.dtype == np.uint8:
            arr = spec.normalize.apply(arr, spec.dtype)
        arr = np.ascontiguousarray(arr, dtype=spec.dtype)
        if arr.shape[1:] != tuple(spec.shape):
            raise InvalidMessage("schema", f"input {name!r} has per-sample shape {arr.shape[1:]}, "
                                           f"expected {tuple(spec.shape)}")
        out[name] = arr
    sizes = {a.shape[0] for a in out.values()}
    if len(sizes) != 1 or 0 in sizes:
        raise InvalidMessage("schema", f"inputs must share one non-empty batch axis, got {sizes}")
    return out


class _Base(Runner):
    """``io_binding`` (GPU only): run through ``bound.BoundSession`` rather than ``session.run``."""

    def __init__(self, model_dir: Path, info: ModelInfo, variant: VariantInfo, device: str,
                 threads: int | None = None, io_binding: bool = False) -> None:
        self.model = info.name
        self.variant = variant.name
        self.device = device
        self.inputs = tuple(variant.inputs)
        self.specs: dict[str, InputSpec] = variant.inputs
        self.sessions = [make_session(model_dir / a, device, threads) for a in variant.artifacts]
        self.runs = [runner_of(s, device, io_binding) for s in self.sessions]


class OnnxRunner(_Base):
    """One ONNX graph per variant (kinds ``whole`` and ``modality-subset``)."""

    def run(self, inputs: dict[str, np.ndarray]) -> RunOutput:
        feed = check_inputs(self.specs, inputs)
        start = time.perf_counter()
        (logits,) = self.runs[0](["logits"], feed)
        elapsed = time.perf_counter() - start
        probs = softmax(logits)
        return RunOutput(outputs={"logits": logits, "probs": probs},
                         predictions=probs.argmax(axis=1), confidences=probs.max(axis=1),
                         request_exec_s=np.full(len(logits), elapsed))


class EarlyExitRunner(_Base):
    """Stage-by-stage early exits (kind ``exit``): later stages run only for unsure requests.

    Artifact k is stage k: it maps its one input (the model input for stage 1, the previous
    stage's ``features`` after that) to its exit's ``logits`` and, except for the last stage, the
    ``features`` the next stage needs. ``rows_per_stage`` counts the rows each stage ran on in the
    last batch, which makes the skipped work observable.
    The ``default`` variant keeps a request going while its confidence is below ``threshold``;
    variant ``exitK`` runs stages 1..K for every request and answers from exit K. ``exits`` gives
    each request's exit (1-based). On the GPU the ``features`` come back to the host between
    stages: choosing the rows that go on is a host decision, and the next stage gets only those.
    """

    def __init__(self, model_dir: Path, info: ModelInfo, variant: VariantInfo, device: str,
                 threads: int | None = None, io_binding: bool = False, threshold: float | None = None) -> None:
        super().__init__(model_dir, info, variant, device, threads, io_binding)
        self.stop_at = int(variant.extra.get("exit") or len(self.sessions))
        self.threshold = float(threshold if threshold is not None
                               else variant.extra.get("threshold", 1.0))
        self.first_input = self.inputs[0]
        self.feed_names = [s.get_inputs()[0].name for s in self.sessions]
        self.rows_per_stage: list[int] = []

    def run(self, inputs: dict[str, np.ndarray]) -> RunOutput:
        x = check_inputs(self.specs, inputs)[self.first_input]
        n = len(x)
        logits = np.zeros((n, 0), dtype=np.float32)
        exits = np.zeros(n, dtype=np.int64)
        done_s = np.zeros(n)
        rows = np.arange(n)
        self.rows_per_stage = []
        start = time.perf_counter()
        for k, run in enumerate(self.runs[:self.stop_at], start=1):
            last = k == self.stop_at
            names = ["logits"] if last else ["logits", "features"]
            self.rows_per_stage.append(len(rows))
            outs = run(names, {self.feed_names[k - 1]: x})
            now = time.perf_counter() - start
            stage_logits = outs[0]
            if logits.shape[1] == 0:
                logits = np.zeros((n, stage_logits.shape[1]), dtype=np.float32)
            leaving = np.ones(len(rows), dtype=bool) if last else (
                softmax(stage_logits).max(axis=1) >= self.threshold)
            logits[rows[leaving]] = stage_logits[leaving]
            exits[rows[leaving]] = k
            done_s[rows[leaving]] = now
            if last or leaving.all():
                break
            rows, x = rows[~leaving], outs[1][~leaving]
        probs = softmax(logits)
        return RunOutput(outputs={"logits": logits, "probs": probs},
                         predictions=probs.argmax(axis=1), confidences=probs.max(axis=1),
                         exits=exits, request_exec_s=done_s)
