"""``ee-audio``: an early-exit CNN on FSDD log-mel, exported stage by stage.

Three stages, each followed by an exit head (exit heads keep a 4x4 or finer spatial grid: global
average pooling leaves early exits far behind). Each stage is its own ONNX graph mapping the
previous stage's ``features`` to its exit's ``logits`` and the next stage's ``features``, so the
runtime (``EarlyExitRunner``) runs later stages only for requests still unsure at the threshold:
execution time really depends on the input. Variants: ``default`` (dynamic, confidence
threshold in its ``extra``) and ``exit1``..``exit3`` (every request stops at that exit).
"""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from rich.progress import Progress
from torch import nn

from adaserve.models import datasets, training
from adaserve.models.manifest import InputSpec, ModelInfo, VariantInfo
from adaserve.models.nets import conv_block, shift_audio

NAME = "ee-audio"
THRESHOLD = 0.9
SOURCE = ("Free Spoken Digit Dataset (Jakobovski et al., CC BY-SA 4.0), log-mel features; "
          "see adaserve/models/data/ATTRIBUTION.md")


def _conv(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU(inplace=True))


class EeAudio(nn.Module):
    """Stages grow in cost: about 0.37, 0.89 and 0.89 M multiply-adds per sample."""

    def __init__(self) -> None:
        super().__init__()
        self.stages = nn.ModuleList([
            nn.Sequential(conv_block(1, 8), conv_block(8, 16)),           # -> 16 x 8 x 8
            nn.Sequential(_conv(16, 32), conv_block(32, 32)),             # -> 32 x 4 x 4
            nn.Sequential(_conv(32, 64), conv_block(64, 64)),             # -> 64 x 2 x 2
        ])
        self.heads = nn.ModuleList([
            nn.Sequential(nn.AvgPool2d(2), nn.Flatten(), nn.Linear(16 * 16, 10)),
            nn.Sequential(nn.Flatten(), nn.Dropout(0.1), nn.Linear(32 * 16, 10)),
            nn.Sequential(nn.Flatten(), nn.Dropout(0.2), nn.Linear(64 * 4, 10)),
        ])

    def forward(self, audio: torch.Tensor) -> list[torch.Tensor]:
        """Logits of every exit."""
        out, x = [], audio
        for stage, head in zip(self.stages, self.heads):
            x = stage(x)
            out.append(head(x))
        return out


class _Stage(nn.Module):
    """Exported stage k: features in, (logits, features) out; the last stage only logits."""

    def __init__(self, net: EeAudio, k: int) -> None:
        super().__init__()
        self.stage, self.head = net.stages[k], net.heads[k]
        self.last = k == len(net.stages) - 1

    def forward(self, x: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        f = self.stage(x)
        return self.head(f) if self.last else (self.head(f), f)


def _exit_logits(model: nn.Module, k: int, b: dict[str, torch.Tensor]) -> torch.Tensor:
    return model(b["audio"])[k]


def _loss(model: nn.Module, b: dict[str, torch.Tensor], y: torch.Tensor) -> torch.Tensor:
    return torch.stack([F.cross_entropy(logits, y) for logits in model(b["audio"])]).sum()


def dynamic_exits(logits: list[np.ndarray], threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """Exit (1-based) and prediction per sample when each leaves at its first confident exit."""
    n = len(logits[0])
    exits = np.full(n, len(logits), dtype=np.int64)
    for k in range(len(logits) - 1, 0, -1):
        p = np.exp(logits[k - 1] - logits[k - 1].max(axis=1, keepdims=True))
        confident = (p / p.sum(axis=1, keepdims=True)).max(axis=1) >= threshold
        exits[confident] = k
    preds = np.stack([lg.argmax(axis=1) for lg in logits])[exits - 1, np.arange(n)]
    return exits, preds


def build(out_dir: Path, *, tiny: bool, seed: int, progress: Progress) -> ModelInfo:
    """Train all exits jointly, export one ONNX per stage, measure each exit and the threshold."""
    rng = training.seed_all(seed)
    train, test = datasets.load_fsdd("train"), datasets.load_fsdd("test")
    x, y = train.audio, train.labels
    if tiny:
        x, y = x[::5], y[::5]
    epochs = 2 if tiny else 12
    model = EeAudio()
    fit = training.fit(model, {"audio": x}, y, epochs=epochs, rng=rng, progress=progress,
                       label=NAME, augment=shift_audio, loss_fn=_loss)
    model.eval()
    n_exits = len(model.stages)
    logits = [training.predict(partial(_exit_logits, model, k), {"audio": test.audio})
              for k in range(n_exits)]
    per_exit = [training.accuracy(lg, test.labels) for lg in logits]
    exits, preds = dynamic_exits(logits, THRESHOLD)
    dynamic_acc = float(np.mean(preds == test.labels))
    fractions = [float(np.mean(exits == k)) for k in range(1, n_exits + 1)]

    start = time.perf_counter()
    artifacts, example = [], torch.from_numpy(test.audio[:2])
    with torch.no_grad():
        for k in range(n_exits):
            path = f"stage{k + 1}.onnx"
            stage = _Stage(model, k)
            name = "audio" if k == 0 else "features_in"
            outputs = ["logits"] if stage.last else ["logits", "features"]
            training.export_onnx(stage, {name: example.numpy()}, out_dir / path, outputs)
            artifacts.append(path)
            if not stage.last:
                example = stage(example)[1]
    audio_spec = {"audio": InputSpec(shape=test.audio.shape[1:], dtype="float32")}
    variants = [VariantInfo(
        name="default", kind="exit", artifacts=artifacts, inputs=audio_spec, metric="accuracy",
        quality=dynamic_acc, extra={"threshold": THRESHOLD, "exits": n_exits,
                                    "exit_fractions": fractions})]
    variants += [VariantInfo(name=f"exit{k}", kind="exit", artifacts=artifacts[:k],
                             inputs=audio_spec, metric="accuracy", quality=per_exit[k - 1],
                             extra={"exit": k, "exits": n_exits})
                 for k in range(1, n_exits + 1)]
    return ModelInfo(
        name=NAME, family="ee-audio", task="spoken-digit classification (early exit)",
        description="3-stage CNN on FSDD log-mel with an exit head after each stage; one ONNX "
                    "per stage so that confident requests skip the later stages",
        labels=[str(d) for d in range(10)], default_variant="default", variants=variants,
        train={"seed": seed, "tiny": tiny, "epochs": epochs, "samples": len(y),
               "seconds": round(fit["seconds"], 2),
               "export_seconds": round(time.perf_counter() - start, 2),
               "metrics": {"train_loss": round(fit["loss"], 4),
                           **{f"test_accuracy_exit{k + 1}": a for k, a in enumerate(per_exit)},
                           "test_accuracy_dynamic": dynamic_acc, "exit_fractions": fractions,
                           "threshold": THRESHOLD, "test_samples": len(test.labels)}},
        versions=training.versions(), source=SOURCE)
