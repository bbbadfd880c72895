"""The GPU paths on a real GPU: CUDA provider, IO binding, torch on CUDA, NVML. Skipped (with the
reason) on hosts without a CUDA-enabled onnxruntime and a visible GPU, such as CI."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adaserve.models.datasets import sample_inputs
from adaserve.workers.gpu import GpuMonitor
from adaserve.workers.runtime import gpu_unavailable, load_runner

NO_GPU = gpu_unavailable()

pytestmark = pytest.mark.skipif(NO_GPU is not None, reason=f"needs a GPU: {NO_GPU}")


def _batch(model: str, n: int, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    samples, _ = sample_inputs(model, n, seed=4)
    return {k: np.stack([s[k] for s in samples]) for k in names}


@pytest.mark.parametrize("model,variant", [("fsdd-cnn", "default"), ("av-digits", "audio+image"),
                                           ("av-digits", "image"), ("ee-audio", "default")])
@pytest.mark.parametrize("io_binding", [True, False])
def test_gpu_answers_as_the_cpu_does(tmp_path: Path, model: str, variant: str, io_binding: bool) -> None:
    cpu = load_runner(model, variant, "cpu", tmp_path, threads=1)
    gpu = load_runner(model, variant, "gpu", tmp_path, io_binding=io_binding)
    assert "CUDAExecutionProvider" in gpu.sessions[0].get_providers()  # type: ignore[attr-defined]
    for n in (1, 8, 32, 8):  # a repeated shape goes through a refilled device buffer
        feed = _batch(model, n, cpu.inputs)
        want, got = cpu.run(feed), gpu.run(feed)
        # cuDNN's convolutions use TF32 on Ampere and later: about 1e-3 apart, not 1e-6.
        assert np.allclose(want.outputs["logits"], got.outputs["logits"], rtol=1e-3, atol=5e-3)
        assert (want.predictions == got.predictions).mean() >= 0.99
        if want.exits is not None:
            assert (want.exits == got.exits).mean() >= 0.95  # exits hinge on a threshold


def test_lm_on_cuda_generates_what_the_cpu_generates(tmp_path: Path) -> None:
    from adaserve.workers.generate import Prompt, pack

    cpu = load_runner("ee-lm-xs", "depth2", "cpu", tmp_path)
    gpu = load_runner("ee-lm-xs", "depth2", "gpu", tmp_path)
    prompts, _ = sample_inputs("ee-lm-xs", 4, seed=0)
    feed = pack([Prompt(p["tokens"].astype("int64"), 8, 0.0, 0, False) for p in prompts], cpu.pad_id)  # type: ignore[attr-defined]
    want, got = cpu.run(feed), gpu.run(feed)
    assert (want.outputs["tokens"] == got.outputs["tokens"]).mean() >= 0.9
    assert np.abs(want.confidences - got.confidences).max() < 0.05


def test_nvml_reports_the_visible_gpu() -> None:
    mon = GpuMonitor.open()
    assert mon is not None
    try:
        figs = mon.figures()
        assert figs["memory_total_mb"] > 1000 and 0 <= figs["util_pct"] <= 100
    finally:
        mon.close()
