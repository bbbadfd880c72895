"""GPU figures for heartbeats, read through NVML (``nvidia-ml-py``, imported as ``pynvml``).

No driver, no library or no device is an ordinary state on a CPU host: ``GpuMonitor.open``
returns ``None`` and the heartbeat simply carries no GPU figures.
"""

from __future__ import annotations

import logging
import os
from typing import Any

log = logging.getLogger(__name__)


def _nvml() -> Any | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception:
        return None


def _visible_handle(nv: Any) -> Any:
    """The handle of CUDA device 0 as this process sees it.

    NVML ignores ``CUDA_VISIBLE_DEVICES``, so the first visible entry (an index or a UUID) is
    mapped back to the physical device the CUDA provider will actually use.
    """
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    if first.startswith(("GPU-", "MIG-")):
        return nv.nvmlDeviceGetHandleByUUID(first)
    return nv.nvmlDeviceGetHandleByIndex(int(first) if first.isdigit() else 0)


class GpuMonitor:
    """Memory, utilisation, power and the energy counter of one GPU."""

    def __init__(self, nv: Any, handle: Any) -> None:
        self._nv = nv
        self._h = handle
        self.name = self._try(lambda: _text(nv.nvmlDeviceGetName(handle))) or "gpu"

    @classmethod
    def open(cls) -> GpuMonitor | None:
        nv = _nvml()
        if nv is None:
            return None
        try:
            return cls(nv, _visible_handle(nv))
        except Exception as exc:
            log.info("NVML present but no usable GPU: %s", exc)
            _shutdown(nv)
            return None

    def figures(self) -> dict[str, float]:
        """Whatever this device reports; a figure the device does not support is left out."""
        nv, h = self._nv, self._h
        out: dict[str, float] = {}
        mem = self._try(lambda: nv.nvmlDeviceGetMemoryInfo(h))
        if mem is not None:
            out["memory_used_mb"] = mem.used / 2**20
            out["memory_total_mb"] = mem.total / 2**20
        util = self._try(lambda: nv.nvmlDeviceGetUtilizationRates(h))
        if util is not None:
            out["util_pct"] = float(util.gpu)
            out["memory_util_pct"] = float(util.memory)
        power = self._try(lambda: nv.nvmlDeviceGetPowerUsage(h))  # milliwatts
        if power is not None:
            out["power_w"] = power / 1000.0
        energy = self._try(lambda: nv.nvmlDeviceGetTotalEnergyConsumption(h))  # millijoules
        if energy is not None:
            out["energy_j"] = energy / 1000.0
        return out

    def close(self) -> None:
        _shutdown(self._nv)

    @staticmethod
    def _try(fn: Any) -> Any:
        try:
            return fn()
        except Exception:
            return None


def _text(v: bytes | str) -> str:
    return v.decode() if isinstance(v, bytes) else v


def _shutdown(nv: Any) -> None:
    try:
        nv.nvmlShutdown()
    except Exception:
        pass
