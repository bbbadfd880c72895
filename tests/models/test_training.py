from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from rich.progress import Progress
from torch import nn

from adaserve.models import training


def test_one_thread_restores_the_thread_count() -> None:
    before = torch.get_num_threads()
    with training.one_thread():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_fit_is_reproducible_and_learns() -> None:
    x = np.random.default_rng(0).normal(size=(200, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)

    def run() -> tuple[nn.Module, dict[str, float]]:
        rng = training.seed_all(7)
        model = nn.Linear(4, 2)
        with Progress(disable=True) as progress:
            stats = training.fit(model, {"x": x}, y, epochs=20, rng=rng, progress=progress, lr=0.05,
                                 label="t", loss_fn=lambda m, b, t: F.cross_entropy(m(b["x"]), t))
        return model, stats

    (a, sa), (b, sb) = run(), run()
    assert torch.equal(a.weight, b.weight) and sa["loss"] == sb["loss"]
    logits = training.predict(lambda bt: a(bt["x"]), {"x": x}, batch_size=64)
    assert logits.shape == (200, 2) and training.accuracy(logits, y) > 0.9


def test_export_has_a_dynamic_batch_axis(tmp_path: Path) -> None:
    import onnxruntime as ort

    model = nn.Sequential(nn.Linear(3, 2))
    path = tmp_path / "m.onnx"
    training.export_onnx(model, {"x": np.zeros((2, 3), np.float32)}, path, ["logits"])
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for n in (1, 5):
        (out,) = session.run(["logits"], {"x": np.ones((n, 3), np.float32)})
        assert out.shape == (n, 2)


def test_versions_name_the_runtimes() -> None:
    assert {"torch", "onnx", "onnxruntime", "numpy", "python"} <= set(training.versions())
