"""``fsdd-cnn``: a small CNN that classifies spoken digits from FSDD log-mel spectrograms.

The first real model of the pipeline: one ONNX file with a dynamic batch axis, input ``audio``
(float32 (1, 32, 32) per request), output ``logits`` (10 digits).
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
import torch.nn.functional as F
from rich.progress import Progress
from torch import nn

from adaserve.models import datasets, training
from adaserve.models.manifest import InputSpec, ModelInfo, VariantInfo
from adaserve.models.nets import audio_encoder, shift_audio

NAME = "fsdd-cnn"
ARTIFACT = "fsdd-cnn.onnx"
SOURCE = ("Free Spoken Digit Dataset (Jakobovski et al., CC BY-SA 4.0), log-mel features; "
          "see adaserve/models/data/ATTRIBUTION.md")


class FsddCnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = audio_encoder((8, 16, 32), 10)

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        return self.body(audio)


def build(out_dir: Path, *, tiny: bool, seed: int, progress: Progress) -> ModelInfo:
    """Train on the FSDD training takes, export ONNX, measure held-out accuracy."""
    rng = training.seed_all(seed)
    train, test = datasets.load_fsdd("train"), datasets.load_fsdd("test")
    x, y = train.audio, train.labels
    if tiny:
        x, y = x[::5], y[::5]
    epochs = 2 if tiny else 10
    model = FsddCnn()
    fit = training.fit(model, {"audio": x}, y, epochs=epochs, rng=rng, progress=progress,
                       label=NAME, augment=shift_audio,
                       loss_fn=lambda m, b, t: F.cross_entropy(m(b["audio"]), t))
    model.eval()
    train_acc = training.accuracy(training.predict(lambda b: model(b["audio"]), {"audio": x}), y)
    test_acc = training.accuracy(training.predict(lambda b: model(b["audio"]),
                                                  {"audio": test.audio}), test.labels)
    start = time.perf_counter()
    training.export_onnx(model, {"audio": test.audio[:2]}, out_dir / ARTIFACT, ["logits"])
    variant = VariantInfo(name="default", kind="whole", artifacts=[ARTIFACT],
                          inputs={"audio": InputSpec(shape=test.audio.shape[1:], dtype="float32")},
                          metric="accuracy", quality=test_acc)
    return ModelInfo(
        name=NAME, family="fsdd-cnn", task="spoken-digit classification",
        description="3-block CNN on 32x32 log-mel spectrograms of FSDD recordings",
        labels=[str(d) for d in range(10)], default_variant="default", variants=[variant],
        train={"seed": seed, "tiny": tiny, "epochs": epochs, "samples": len(y),
               "seconds": round(fit["seconds"], 2),
               "export_seconds": round(time.perf_counter() - start, 2),
               "metrics": {"train_loss": round(fit["loss"], 4), "train_accuracy": train_acc,
                           "test_accuracy": test_acc, "test_samples": len(test.labels)}},
        versions=training.versions(), source=SOURCE)
