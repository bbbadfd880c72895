"""What every runtime returns, and the onnxruntime provider choice."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cache
from typing import Protocol

import numpy as np

from adaserve.broker.errors import DeviceUnavailable

log = logging.getLogger(__name__)


@dataclass
class RunOutput:
    """Outputs of one batch; per-request arrays are indexed like the batch's requests."""

    outputs: dict[str, np.ndarray]
    predictions: np.ndarray | None = None
    confidences: np.ndarray | None = None
    exits: np.ndarray | None = None
    request_exec_s: np.ndarray | None = None


class Runner(Protocol):
    model: str
    variant: str
    device: str
    inputs: tuple[str, ...]

    def run(self, inputs: dict[str, np.ndarray]) -> RunOutput:
        """Run one batch; each input is stacked along axis 0."""


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
    except Exception as exc:  # noqa: BLE001 - the provider may still find system libraries
        log.info("onnxruntime.preload_dlls failed (%s); relying on the library search path", exc)


def gpu_present() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount()) > 0
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no driver, no library, no device: all mean "no GPU"
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
    except Exception as exc:  # noqa: BLE001 - any failure is a reason to report, not to raise
        return str(exc)
    return None
