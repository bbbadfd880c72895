"""Small torch building blocks shared by the zoo's audio and image models."""

from __future__ import annotations

import numpy as np
from torch import nn


def conv_block(cin: int, cout: int) -> nn.Sequential:
    """3x3 conv, batch norm, ReLU, 2x2 max-pool: halves each spatial side."""
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU(inplace=True), nn.MaxPool2d(2))


def audio_encoder(widths: tuple[int, ...], out_dim: int, side: int = 32) -> nn.Sequential:
    """Conv blocks over a (1, side, side) log-mel, then a linear embedding of the feature map."""
    layers: list[nn.Module] = []
    cin = 1
    for w in widths:
        layers.append(conv_block(cin, w))
        cin = w
    cells = (side >> len(widths)) ** 2
    layers += [nn.Flatten(), nn.Dropout(0.2), nn.Linear(cin * cells, out_dim)]
    return nn.Sequential(*layers)


def shift_audio(batch: dict[str, np.ndarray], rng: np.random.Generator,
                max_shift: int = 3) -> dict[str, np.ndarray]:
    """Augmentation: roll each log-mel along time by up to ``max_shift`` frames."""
    audio = batch["audio"].copy()
    for i, s in enumerate(rng.integers(-max_shift, max_shift + 1, size=len(audio))):
        audio[i] = np.roll(audio[i], int(s), axis=-1)
    return {**batch, "audio": audio}
