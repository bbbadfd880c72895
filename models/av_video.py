"""``av-video``: a spoken digit (cheap, strong) + a short noisy video of the written digit (costly).

The cost structure MOSEL's models have (paper Sec. 2.2): one modality alone carries most of the
accuracy at little compute, the other costs far more per request and adds a few points. Here the
audio is FSDD speech under light background noise through a tiny log-mel CNN; the "video" is
``VIDEO_FRAMES`` noisy, jittered views of one handwritten digit of the same label, each frame through a
wide CNN and the frame embeddings averaged (a per-frame encoder as in TBN's video branch). Fusion
is additive after the encoders, trained with random modality dropout, and one ONNX graph is
exported per subset (``audio``, ``video``, ``audio+video``) holding only the encoders it uses.
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
from adaserve.models.nets import audio_encoder, conv_block, shift_audio

NAME = "av-video"
EMB = 64
MODALITIES = ("audio", "video")  # the order of ``AvVideo.subset``
SUBSETS: dict[str, tuple[str, ...]] = {
    "audio": ("audio",), "video": ("video",), "audio+video": ("audio", "video"),
}
DROPOUT_P = {"audio+video": 0.5, "audio": 0.25, "video": 0.25}
AUDIO_WIDTHS = (4, 8, 16)
FRAME_WIDTHS = (32, 96, 96)
SOURCE = ("Free Spoken Digit Dataset (Jakobovski et al., CC BY-SA 4.0) log-mel with light added "
          "noise, paired with noisy frames of UCI Optical Recognition of Handwritten Digits via "
          "scikit-learn (Alpaydin and Kaynak, CC BY 4.0); see adaserve/models/data/ATTRIBUTION.md")


class FrameEncoder(nn.Module):
    """Each 8x8 frame through a wide CNN at full resolution, then the mean over frames."""

    def __init__(self) -> None:
        super().__init__()
        a, b, c = FRAME_WIDTHS
        self.body = nn.Sequential(
            nn.Conv2d(1, a, 3, padding=1), nn.ReLU(),
            nn.Conv2d(a, b, 3, padding=1), nn.ReLU(),
            conv_block(b, c), nn.Flatten(), nn.Linear(c * 16, EMB), nn.ReLU())

    def forward(self, video: torch.Tensor) -> torch.Tensor:
        n, t = video.shape[0], video.shape[1]
        frames = self.body(video.reshape(n * t, 1, 8, 8))
        return frames.reshape(n, t, EMB).mean(dim=1)


class AvVideo(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.audio = audio_encoder(AUDIO_WIDTHS, EMB)
        self.video = FrameEncoder()
        self.proj_audio = nn.Linear(EMB, EMB, bias=False)
        self.proj_video = nn.Linear(EMB, EMB, bias=False)
        self.bias = nn.Parameter(torch.zeros(EMB))
        self.head = nn.Sequential(nn.ReLU(), nn.Dropout(0.2), nn.Linear(EMB, 10))

    def forward(self, audio: torch.Tensor, video: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = (mask[:, :1] * self.proj_audio(self.audio(audio))
             + mask[:, 1:] * self.proj_video(self.video(video)) + self.bias)
        return self.head(h)

    def subset(self, audio: torch.Tensor | None, video: torch.Tensor | None) -> torch.Tensor:
        """Logits from the given modalities only; an absent encoder is never run."""
        h = self.bias
        if audio is not None:
            h = h + self.proj_audio(self.audio(audio))
        if video is not None:
            h = h + self.proj_video(self.video(video))
        return self.head(h)


def _augment(batch: dict[str, np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Fresh audio noise, a fresh clip and a random modality subset per sample and epoch."""
    audio = datasets.noisy_audio(shift_audio(batch, rng)["audio"], rng, datasets.VIDEO_AUDIO_NOISE_DB)
    video = datasets.video_clips(batch["digit"], "train", rng, frames=datasets.TRAIN_FRAMES)
    mask = subsets.dropout_mask(rng, len(audio), DROPOUT_P, SUBSETS, MODALITIES)
    return {"audio": audio, "video": video, "mask": mask}


def _loss(model: nn.Module, b: dict[str, torch.Tensor], y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(model(b["audio"], b["video"], b["mask"]), y)


def build(out_dir: Path, *, tiny: bool, seed: int, progress: Progress) -> ModelInfo:
    """Train with modality dropout, export one ONNX per subset, measure each on held-out clips."""
    rng = training.seed_all(seed)
    train, test = datasets.load_fsdd("train"), datasets.load_av_video("test")
    x, y = train.audio, train.labels
    if tiny:
        x, y = x[::5], y[::5]
    epochs = 2 if tiny else 12
    model = AvVideo()
    fit = training.fit(model, {"audio": x, "digit": y}, y, epochs=epochs, rng=rng,
                       progress=progress, label=NAME, augment=_augment, loss_fn=_loss)
    model.eval()
    feeds = {"audio": test.audio, "video": test.video}
    start = time.perf_counter()
    variants, metrics = subsets.export_subsets(model, SUBSETS, MODALITIES, feeds, test.labels, out_dir)
    return ModelInfo(
        name=NAME, family="av-video", task="audio-visual digit classification",
        description="spoken digit (tiny log-mel CNN, cheap) + noisy video of the written digit "
                    "(wide per-frame CNN, costly), additive fusion trained with random modality "
                    "dropout; one ONNX per modality subset",
        labels=[str(d) for d in range(10)], default_variant="audio+video", variants=variants,
        train={"seed": seed, "tiny": tiny, "epochs": epochs, "samples": len(y),
               "modality_dropout": DROPOUT_P, "audio_noise_db": datasets.VIDEO_AUDIO_NOISE_DB,
               "video_frames": datasets.VIDEO_FRAMES, "train_frames": datasets.TRAIN_FRAMES,
               "video_noise_sigma": datasets.VIDEO_NOISE,
               "audio_widths": list(AUDIO_WIDTHS), "frame_widths": list(FRAME_WIDTHS),
               "seconds": round(fit["seconds"], 2),
               "export_seconds": round(time.perf_counter() - start, 2),
               "metrics": {"train_loss": round(fit["loss"], 4), **metrics,
                           "test_samples": len(test.labels)}},
        versions=training.versions(), source=SOURCE)
