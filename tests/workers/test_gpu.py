"""NVML figures through a stand-in ``pynvml`` (no GPU needed), and NVML's absence as a normal state."""

from __future__ import annotations

import sys
import types
from types import SimpleNamespace

import pytest

from adaserve.workers import GpuMonitor


def _fake_nvml(*, init_fails: bool = False) -> types.ModuleType:
    nv = types.ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    def init() -> None:
        if init_fails:
            raise NVMLError("driver not loaded")

    def unsupported(h: object) -> None:
        raise NVMLError("not supported")

    nv.nvmlInit = init  # type: ignore[attr-defined]
    nv.nvmlShutdown = lambda: None  # type: ignore[attr-defined]
    nv.nvmlDeviceGetHandleByIndex = lambda i: ("dev", i)  # type: ignore[attr-defined]
    nv.nvmlDeviceGetName = lambda h: b"Fake GPU"  # type: ignore[attr-defined]
    nv.nvmlDeviceGetMemoryInfo = lambda h: SimpleNamespace(used=2 * 2**20, total=8 * 2**20)  # type: ignore[attr-defined]
    nv.nvmlDeviceGetUtilizationRates = lambda h: SimpleNamespace(gpu=37, memory=5)  # type: ignore[attr-defined]
    nv.nvmlDeviceGetPowerUsage = unsupported  # type: ignore[attr-defined]
    nv.nvmlDeviceGetTotalEnergyConsumption = lambda h: 12_500  # type: ignore[attr-defined]
    return nv


def test_figures_leave_out_what_the_device_does_not_report(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml())
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    mon = GpuMonitor.open()
    assert mon is not None and mon.name == "Fake GPU" and mon._h == ("dev", 1)
    assert mon.figures() == {"memory_used_mb": 2.0, "memory_total_mb": 8.0, "util_pct": 37.0,
                             "memory_util_pct": 5.0, "energy_j": 12.5}
    mon.close()


def test_no_nvml_is_not_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml(init_fails=True))
    assert GpuMonitor.open() is None
