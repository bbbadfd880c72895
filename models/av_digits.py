"""``av-digits``: spoken digit (noisy FSDD log-mel) + handwritten digit (noisy 8x8), fused.

Trained once with random modality dropout, then exported as one ONNX graph per modality subset
(``audio``, ``image``, ``audio+image``). A subset's graph contains only the encoders it uses, so
the subsets differ in cost as well as in accuracy: the audio CNN costs far more per sample than
the image MLP. Fusion is additive in the first hidden layer of the head, so leaving a modality
out is exactly its embedding set to zero, which is what training with dropout saw.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from rich.progress import Progress
from torch import nn

from adaserve.models import datasets, subsets, training
from adaserve.models.manifest import ModelInfo
from adaserve.models.nets import audio_encoder, shift_audio

NAME = "av-digits"
EMB = 64
MODALITIES = ("audio", "image")  # the order of ``AvDigits.subset``
SUBSETS: dict[str, tuple[str, ...]] = {
    "audio": ("audio",), "image": ("image",), "audio+image": ("audio", "image"),
}
# Per sample during training: both modalities half of the time, each alone a quarter.
DROPOUT_P = {"audio+image": 0.5, "audio": 0.25, "image": 0.25}
SOURCE = ("Free Spoken Digit Dataset (Jakobovski et al., CC BY-SA 4.0) log-mel with added noise, "
          "paired with UCI Optical Recognition of Handwritten Digits via scikit-learn (Alpaydin "
          "and Kaynak, CC BY 4.0) with added noise; see adaserve/models/data/ATTRIBUTION.md")


class AvDigits(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.audio = audio_encoder((8, 16, 32), EMB)
        self.image = nn.Sequential(nn.Flatten(), nn.Linear(64, EMB), nn.ReLU(), nn.Linear(EMB, EMB))
        self.proj_audio = nn.Linear(EMB, EMB, bias=False)
        self.proj_image = nn.Linear(EMB, EMB, bias=False)
        self.bias = nn.Parameter(torch.zeros(EMB))
        self.head = nn.Sequential(nn.ReLU(), nn.Dropout(0.2), nn.Linear(EMB, 10))

    def forward(self, audio: torch.Tensor, image: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = (mask[:, :1] * self.proj_audio(self.audio(audio))
             + mask[:, 1:] * self.proj_image(self.image(image)) + self.bias)
        return self.head(h)

    def subset(self, audio: torch.Tensor | None, image: torch.Tensor | None) -> torch.Tensor:
        """Logits from the given modalities only; an absent encoder is never run."""
        h = self.bias
        if audio is not None:
            h = h + self.proj_audio(self.audio(audio))
        if image is not None:
            h = h + self.proj_image(self.image(image))
        return self.head(h)


def _augment(batch: dict[str, np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Fresh noise, a fresh partner image and a random modality subset per sample and epoch."""
    audio = datasets.noisy_audio(shift_audio(batch, rng)["audio"], rng)
    image = datasets.pair_images(batch["digit"], "train", rng)
    mask = subsets.dropout_mask(rng, len(audio), DROPOUT_P, SUBSETS, MODALITIES)
    return {"audio": audio, "image": image, "mask": mask}


def _loss(model: nn.Module, b: dict[str, torch.Tensor], y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(model(b["audio"], b["image"], b["mask"]), y)


def build(out_dir: Path, *, tiny: bool, seed: int, progress: Progress) -> ModelInfo:
    """Train with modality dropout, export one ONNX per subset, measure each on held-out pairs."""
    rng = training.seed_all(seed)
    train, test = datasets.load_fsdd("train"), datasets.load_av_digits("test")
    x, y = train.audio, train.labels
    if tiny:
        x, y = x[::5], y[::5]
    epochs = 2 if tiny else 20
    model = AvDigits()
    fit = training.fit(model, {"audio": x, "digit": y}, y, epochs=epochs, rng=rng,
                       progress=progress, label=NAME, augment=_augment, loss_fn=_loss)
    model.eval()
    feeds = {"audio": test.audio, "image": test.image}
    start = time.perf_counter()
    variants, metrics = subsets.export_subsets(model, SUBSETS, MODALITIES, feeds, test.labels, out_dir)
    return ModelInfo(
        name=NAME, family="av-digits", task="audio-visual digit classification",
        description="noisy spoken digit (log-mel CNN) + noisy handwritten digit (MLP), additive "
                    "fusion trained with random modality dropout; one ONNX per modality subset",
        labels=[str(d) for d in range(10)], default_variant="audio+image", variants=variants,
        train={"seed": seed, "tiny": tiny, "epochs": epochs, "samples": len(y),
               "modality_dropout": DROPOUT_P, "audio_noise_db": datasets.AUDIO_NOISE_DB,
               "image_noise_sigma": datasets.IMAGE_NOISE, "seconds": round(fit["seconds"], 2),
               "export_seconds": round(time.perf_counter() - start, 2),
               "metrics": {"train_loss": round(fit["loss"], 4), **metrics,
                           "test_samples": len(test.labels)}},
        versions=training.versions(), source=SOURCE)
