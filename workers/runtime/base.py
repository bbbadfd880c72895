"""The runner interface, what every runtime returns, and the onnxruntime provider choice."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

import numpy as np

from adaserve.broker.errors import DeviceUnavailable
from adaserve.models.manifest import InputSpec

log = logging.getLogger(__name__)


@dataclass
class RunOutput:
    """Outputs of one batch; per-request arrays are indexed like the batch's requests."""

    outputs: dict[str, np.ndarray]
    predictions: np.ndarray | None = None
    confidences: np.ndarray | None = None
    exits: np.ndarray | None = None
    request_exec_s: np.ndarray | None = None


class Runner(ABC):
    """A model variant loaded on a device: ``run`` takes a batch, the attributes describe it.

    Optional capabilities are declared here with their defaults, so callers read them without
    probing. What only some runners do is a subclass (``GenerativeRunner``, ``SplitPart``) that
    callers tell apart with one ``isinstance`` when the runner is loaded, not per batch.
    """

    model: str
    variant: str  # the variant's own name: the one "default" stands for, once loaded
    device: str
    inputs: tuple[str, ...]  # the inputs a batch must carry
    # Per-request specs (no batch axis). None: the runner does not say, and a request of the
    # wrong shape is only caught when the runtime rejects its group.
    specs: Mapping[str, InputSpec] | None = None

    @property
    def input_limits(self) -> Mapping[str, Mapping[str, int]]:
        """Per input, limits beyond its spec that the planner checks requests against before they
        share a batch (sent with the heartbeat); none unless a runner has some."""
        return {}

    @abstractmethod
    def run(self, inputs: dict[str, np.ndarray]) -> RunOutput:
        """Run one batch; each input is stacked along axis 0."""


class SplitPart(Runner):
    """One part of a split model. A part that is not the last returns ``outputs["intermediate"]``,
    the input of the part named ``next``; the last part (``next`` None) answers like the whole model."""

    next: str | None

    @property
    def is_last(self) -> bool:
        return self.next is None


class GenerativeRunner(Runner):
    """Generates tokens from prompts: the ``tokens`` input right-aligned and left-padded with
    ``pad_id`` (the full contract is in ``runtime.lm``)."""

    block_size: int  # context in tokens, prompt and generated tokens together
    vocab_size: int
    pad_id: int
    max_new_tokens: int  # tokens generated for a request that does not say

    @abstractmethod
    def generate(self, tokens: np.ndarray, n: int, *, wanted: np.ndarray | None = None,
                 temperature: np.ndarray | None = None, seeds: np.ndarray | None = None,
                 ) -> tuple[np.ndarray, np.ndarray]:
        """Generated ids and their confidences, both [B, n], for right-aligned padded prompts."""

    @abstractmethod
    def perplexity(self, ids: np.ndarray, max_windows: int | None = None) -> tuple[float, int]:
        """Perplexity of the runner on a token sequence, and the tokens it scored."""


def choose_providers(device: str) -> list[str]:
    """Providers for ``device`` from what this onnxruntime build has *and* the host can use.

    onnxruntime-gpu lists CUDAExecutionProvider even on a machine with no GPU (the provider then
    fails to load), so a GPU must also be visible before CUDA is asked for.
    """
    import onnxruntime as ort

    available = ort.get_available_providers()
    if device == "gpu":
        if "CUDAExecutionProvider" not in available or not gpu_present():
            raise DeviceUnavailable("device 'gpu' asked for, but no CUDA provider or no visible GPU")
        preload_cuda_libraries()
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


@cache
def preload_cuda_libraries() -> None:
    """Load CUDA and cuDNN from the ``nvidia-*`` wheels (torch's CUDA build brings them), so the
    CUDA provider finds them without ``LD_LIBRARY_PATH``; libraries already loaded, or found on
    the system path later, make this a no-op."""
    import onnxruntime as ort

    preload = getattr(ort, "preload_dlls", None)  # onnxruntime-gpu >= 1.21
    if preload is None:
        return
    try:
        preload()
    except Exception as exc:
        log.info("onnxruntime.preload_dlls failed (%s); relying on the library search path", exc)


def gpu_present() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount()) > 0
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return False


def check_cuda() -> None:
    """Build a one-node session on the CUDA provider; ``DeviceUnavailable`` saying why when it cannot.

    ``choose_providers`` only sees that the provider is compiled in and a GPU is visible; whether
    its CUDA and cuDNN libraries load shows only when a session is made.
    """
    import onnxruntime as ort
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "probe", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # any onnxruntime this project supports reads IR 8
    session = ort.InferenceSession(model.SerializeToString(), providers=choose_providers("gpu"))
    if "CUDAExecutionProvider" not in session.get_providers():
        raise DeviceUnavailable("the CUDA provider is installed but did not load (CUDA 13 and cuDNN 9 "
                           "libraries must be loadable; onnxruntime's warning above says which one is missing)")


def gpu_unavailable() -> str | None:
    """Why the CUDA provider cannot serve here, or None when it can (tests skip on the reason)."""
    try:
        check_cuda()
    except Exception as exc:
        return str(exc)
    return None
