"""The held-out and training data of the zoo's models, as numpy arrays (no torch, no onnxruntime).

Producers and benchmarks call ``sample_inputs`` to send real jobs whose correct answers are known;
the builders call the ``load_*`` functions. Splits follow FSDD's official one: takes 0-4 of every
speaker and digit are the test split, takes 5-49 the training split.

``av-digits`` pairs each recording, heard through background noise, with a noisy handwritten
digit of the same label, so that neither modality alone is enough. Images come from two disjoint
pools of scikit-learn's digits (train and test), so the image branch cannot memorise test images;
the test pairing and its noise are fixed (``TEST_PAIR_SEED``) so that the accuracy in a manifest
and the accuracy a producer observes refer to the same inputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources

import numpy as np

from adaserve.broker.errors import ModelNotFound

SPLITS = ("train", "test")
TEST_TAKES = 5
IMAGE_NOISE = 0.55
AUDIO_NOISE_DB = -17.0
FLOOR_DB = 80.0
TEST_PAIR_SEED = 20240
AUDIO_MODELS = ("fsdd-cnn", "ee-audio")
AV_MODELS = ("av-digits",)
VIDEO_MODELS = ("av-video",)
VIDEO_FRAMES = 24  # frames of a served clip; training sees TRAIN_FRAMES of them (as TSN does)
TRAIN_FRAMES = 4
VIDEO_NOISE = 0.9
VIDEO_AUDIO_NOISE_DB = -28.0
LM_MODELS = ("ee-lm-xs", "ee-lm-s", "ee-lm-code")
PROMPT_LENGTHS = (8, 32)  # language-model prompts: held-out text of 8 to 32 characters


@dataclass(frozen=True)
class FsddSplit:
    audio: np.ndarray  # float32 (N, 1, n_mels, frames), values in [0, 1]
    labels: np.ndarray  # int64 (N,)
    speakers: np.ndarray  # int64 (N,)
    takes: np.ndarray  # int64 (N,)


@dataclass(frozen=True)
class VideoSplit:
    audio: np.ndarray  # float32 (N, 1, n_mels, frames)
    video: np.ndarray  # float32 (N, VIDEO_FRAMES, 8, 8): one digit image, fresh noise per frame
    labels: np.ndarray  # int64 (N,)


@dataclass(frozen=True)
class AvSplit:
    audio: np.ndarray  # float32 (N, 1, n_mels, frames)
    image: np.ndarray  # float32 (N, 1, 8, 8), values in [0, 1], noisy
    labels: np.ndarray  # int64 (N,)


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")


@cache
def _npz(name: str) -> dict[str, np.ndarray]:
    with resources.files("adaserve.models.data").joinpath(name).open("rb") as f:
        with np.load(f) as z:
            return {k: z[k] for k in z.files}


def load_fsdd(split: str) -> FsddSplit:
    """FSDD log-mel features of ``split`` (``"train"`` or ``"test"``)."""
    _check_split(split)
    z = _npz("fsdd_logmel.npz")
    keep = (z["takes"] < TEST_TAKES) if split == "test" else (z["takes"] >= TEST_TAKES)
    audio = (z["features"][keep].astype(np.float32) / 255.0)[:, None, :, :]
    return FsddSplit(audio, z["labels"][keep].copy(), z["speakers"][keep].copy(),
                     z["takes"][keep].copy())


def digit_pool(split: str) -> tuple[np.ndarray, np.ndarray]:
    """Clean digit images of ``split``'s pool (float32 (N, 8, 8) in [0, 1]) and their labels.

    Every third image is in the test pool; the pools never share an image.
    """
    _check_split(split)
    z = _npz("digits.npz")
    index = np.arange(len(z["labels"]))
    keep = (index % 3 == 0) if split == "test" else (index % 3 != 0)
    return z["images"][keep].astype(np.float32) / 16.0, z["labels"][keep].copy()


def noisy_images(clean: np.ndarray, rng: np.random.Generator,
                 sigma: float = IMAGE_NOISE) -> np.ndarray:
    """Gaussian pixel noise, clipped to [0, 1]: makes the 8x8 digits a weak but useful modality."""
    noisy = clean + rng.normal(0.0, sigma, size=clean.shape).astype(np.float32)
    return np.clip(noisy, 0.0, 1.0).astype(np.float32)


def noisy_audio(audio: np.ndarray, rng: np.random.Generator,
                level_db: float = AUDIO_NOISE_DB) -> np.ndarray:
    """Add noise in the power domain of the log-mel (as background noise would add to speech).

    ``audio`` holds peak-relative dB scaled to [0, 1]; the noise power of each mel cell is
    ``level_db`` (relative to the speech peak) plus 4 dB of random fluctuation.
    """
    speech_db = audio.astype(np.float64) * FLOOR_DB - FLOOR_DB
    noise_db = level_db + rng.normal(0.0, 4.0, size=audio.shape)
    mixed = 10.0 * np.log10(10.0 ** (speech_db / 10.0) + 10.0 ** (noise_db / 10.0))
    mixed -= mixed.max(axis=(-2, -1), keepdims=True)
    return ((np.clip(mixed, -FLOOR_DB, 0.0) + FLOOR_DB) / FLOOR_DB).astype(np.float32)


def pair_images(labels: np.ndarray, split: str, rng: np.random.Generator) -> np.ndarray:
    """A noisy image from ``split``'s pool with each label, float32 (N, 1, 8, 8)."""
    images, image_labels = digit_pool(split)
    by_label = [np.flatnonzero(image_labels == d) for d in range(10)]
    picks = np.array([rng.choice(by_label[int(d)]) for d in labels], dtype=np.int64)
    return noisy_images(images[picks], rng)[:, None, :, :]


def load_av_digits(split: str, seed: int = TEST_PAIR_SEED) -> AvSplit:
    """Noisy audio-image pairs of ``split``; the test split should keep the default seed."""
    fsdd = load_fsdd(split)
    rng = np.random.default_rng(seed)
    image = pair_images(fsdd.labels, split, rng)
    return AvSplit(noisy_audio(fsdd.audio, rng), image, fsdd.labels)


def video_clips(labels: np.ndarray, split: str, rng: np.random.Generator,
                frames: int = VIDEO_FRAMES, sigma: float = VIDEO_NOISE) -> np.ndarray:
    """A short "video" of one image of each label: ``frames`` views, each with its own noise and a
    jitter of up to one pixel, so that no single frame is reliable but together they are."""
    images, image_labels = digit_pool(split)
    by_label = [np.flatnonzero(image_labels == d) for d in range(10)]
    picks = np.array([rng.choice(by_label[int(d)]) for d in labels], dtype=np.int64)
    clips = np.repeat(images[picks][:, None], frames, axis=1)
    shifts = rng.integers(-1, 2, size=(len(labels), frames, 2))
    for i in range(len(labels)):
        for t in range(frames):
            clips[i, t] = np.roll(clips[i, t], tuple(int(x) for x in shifts[i, t]), axis=(0, 1))
    return noisy_images(clips, rng, sigma)


def load_av_video(split: str, seed: int = TEST_PAIR_SEED) -> VideoSplit:
    """Lightly noisy audio with a noisy clip of the same digit; the test split keeps the seed."""
    fsdd = load_fsdd(split)
    rng = np.random.default_rng(seed)
    video = video_clips(fsdd.labels, split, rng)
    return VideoSplit(noisy_audio(fsdd.audio, rng, VIDEO_AUDIO_NOISE_DB), video, fsdd.labels)


def _choose(total: int, n: int, seed: int) -> np.ndarray:
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    rng = np.random.default_rng(seed)
    return rng.choice(total, size=n, replace=n > total)


def sample_inputs(model: str, n: int, *, seed: int,
                  split: str = "test") -> tuple[list[dict[str, np.ndarray]], np.ndarray]:
    """``n`` real requests for ``model`` (inputs per sample, shapes as in its manifest) and labels.

    Samples are drawn without replacement while ``n`` fits in the split. Models without
    inputs here raise ``ModelNotFound``. Language models get prompts from the held-out text
    (whatever ``split``), each with the character that follows it as its label.
    """
    _check_split(split)
    if model in AUDIO_MODELS:
        fsdd = load_fsdd(split)
        idx = _choose(len(fsdd.labels), n, seed)
        return [{"audio": fsdd.audio[i]} for i in idx], fsdd.labels[idx]
    if model in AV_MODELS:
        av = load_av_digits(split)
        idx = _choose(len(av.labels), n, seed)
        return [{"audio": av.audio[i], "image": av.image[i]} for i in idx], av.labels[idx]
    if model in VIDEO_MODELS:
        vid = load_av_video(split)
        idx = _choose(len(vid.labels), n, seed)
        return [{"audio": vid.audio[i], "video": vid.video[i]} for i in idx], vid.labels[idx]
    if model == "effnet-lite0":
        # Real photos (scikit-image's bundled ones, several views each); the label is the first
        # ImageNet class accepted for the photo.
        from adaserve.models.effnet.photos import sample_photos

        images, accepted = sample_photos(n, seed=seed)
        return [{"image": img} for img in images], np.array([a[0] for a in accepted], dtype=np.int64)
    if model == "ee-lm-s-split":
        # The ONNX export takes fixed windows of 32 held-out characters; the label follows each.
        from adaserve.models.lm.prompts import sample_prompts

        tokens, following = sample_prompts(n, 32, seed=seed)
        return [{"tokens": t} for t in tokens], following
    if model in LM_MODELS:
        # Held-out prompts of varied lengths (the most recent characters of a longer window);
        # the label is the character that follows each prompt in the text.
        from adaserve.models.lm.prompts import sample_prompts

        lo, hi = PROMPT_LENGTHS
        tokens, following = sample_prompts(n, hi, seed=seed)
        lengths = np.random.default_rng(seed).integers(lo, hi + 1, size=n)
        return [{"tokens": t[hi - k:]} for t, k in zip(tokens, lengths)], following
    raise ModelNotFound(f"no sample inputs for model {model!r} (have: "
                        f"{', '.join(AUDIO_MODELS + AV_MODELS + VIDEO_MODELS + LM_MODELS + ('effnet-lite0', 'ee-lm-s-split'))})")
