"""What every runtime returns, and the onnxruntime provider choice."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


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
            raise RuntimeError("device 'gpu' asked for, but no CUDA provider or no visible GPU")
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


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
