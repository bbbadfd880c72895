"""Shared training, evaluation and export steps of the zoo's torch builders.

Everything here is deterministic for a given seed on a given machine: one seeded generator drives
shuffling and augmentation, and torch's own generator is seeded before the weights are created.
"""

from __future__ import annotations

import platform
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch
from rich.progress import Progress
from torch import nn

Batch = dict[str, torch.Tensor]
Augment = Callable[[dict[str, np.ndarray], np.random.Generator], dict[str, np.ndarray]]
LossFn = Callable[[nn.Module, Batch, torch.Tensor], torch.Tensor]


def seed_all(seed: int) -> np.random.Generator:
    """Seed torch and return the numpy generator that drives the rest of the run."""
    torch.manual_seed(seed)
    return np.random.default_rng(seed)


@contextmanager
def one_thread() -> Iterator[None]:
    """Run torch on one thread inside the block.

    These small convolutions train several times faster on one core than on two contended ones,
    and the weights then do not depend on the machine's core count.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def versions() -> dict[str, str]:
    import onnx
    import onnxruntime

    return {"python": platform.python_version(), "numpy": np.__version__,
            "torch": torch.__version__, "onnx": onnx.__version__,
            "onnxruntime": onnxruntime.__version__}


def _tensors(arrays: dict[str, np.ndarray]) -> Batch:
    return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in arrays.items()}


def fit(model: nn.Module, data: dict[str, np.ndarray], labels: np.ndarray, *, loss_fn: LossFn,
        epochs: int, rng: np.random.Generator, progress: Progress, label: str,
        batch_size: int = 64, lr: float = 3e-3, augment: Augment | None = None) -> dict[str, float]:
    """Adam with a one-cycle schedule, on one thread; returns the last epoch's mean loss and seconds."""
    with one_thread():
        return _fit(model, data, labels, loss_fn=loss_fn, epochs=epochs, rng=rng,
                    progress=progress, label=label, batch_size=batch_size, lr=lr, augment=augment)


def _fit(model: nn.Module, data: dict[str, np.ndarray], labels: np.ndarray, *, loss_fn: LossFn,
         epochs: int, rng: np.random.Generator, progress: Progress, label: str, batch_size: int,
         lr: float, augment: Augment | None) -> dict[str, float]:
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=1e-4)
    steps = epochs * -(-len(labels) // batch_size)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps)
    task = progress.add_task(f"{label}: train", total=epochs)
    start = time.perf_counter()
    loss_mean = float("nan")
    for epoch in range(epochs):
        model.train()
        order = rng.permutation(len(labels))
        total, count = 0.0, 0
        for lo in range(0, len(order), batch_size):
            idx = order[lo:lo + batch_size]
            batch = {k: v[idx] for k, v in data.items()}
            if augment is not None:
                batch = augment(batch, rng)
            y = torch.from_numpy(labels[idx])
            loss = loss_fn(model, _tensors(batch), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item() * len(idx)
            count += len(idx)
        loss_mean = total / count
        progress.update(task, advance=1,
                        description=f"{label}: train (epoch {epoch + 1}, loss {loss_mean:.3f})")
    return {"loss": loss_mean, "seconds": time.perf_counter() - start}


@torch.no_grad()
def predict(fn: Callable[[Batch], torch.Tensor], data: dict[str, np.ndarray],
            batch_size: int = 256) -> np.ndarray:
    """Logits of ``fn`` over ``data`` in eval mode, as a float32 array."""
    n = len(next(iter(data.values())))
    out = [fn(_tensors({k: v[lo:lo + batch_size] for k, v in data.items()})).numpy()
           for lo in range(0, n, batch_size)]
    return np.concatenate(out).astype(np.float32)


def accuracy(logits: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(np.argmax(logits, axis=1) == labels))


def export_onnx(module: nn.Module, example: dict[str, np.ndarray], path: Path,
                output_names: Sequence[str]) -> None:
    """ONNX with a dynamic batch axis on every input and output (TorchScript exporter, opset 17)."""
    module.eval()
    names = list(example)
    args = tuple(torch.from_numpy(example[k]) for k in names)
    axes = {n: {0: "batch"} for n in [*names, *output_names]}
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        # The torch.export-based exporter needs onnxscript, which adaserve does not depend on;
        # the TorchScript exporter handles these plain feed-forward graphs fine.
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(module, args, str(path), input_names=names,
                          output_names=list(output_names), dynamic_axes=axes, opset_version=17,
                          dynamo=False, do_constant_folding=True)
