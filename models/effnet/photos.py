"""Real photos for EfficientNet-Lite0: scikit-image's bundled images, their labels, preprocessing.

ImageNet class names (``imagenet_classes.json``): the WordNet-derived short names of Keras'
``imagenet_class_index.json`` (MIT), as listed in pytorch/hub's ``imagenet_classes.txt``
(BSD-3-Clause); underscores became spaces. Index i is the model's output i.

Each photo's accepted labels are the ImageNet classes that name what the photo shows (the cat
Chelsea is any domestic-cat class, the coffee photo espresso or cup, ...). The astronaut photo is
left out of the check: ImageNet has no class for an astronaut or a space suit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources

import numpy as np

IMAGE_SIZE = 224
# EfficientNet-Lite was trained on inputs scaled as (pixel - 127) / 128.
MEAN, STD = 127.0, 128.0


@dataclass(frozen=True)
class Photo:
    name: str           # scikit-image's data function
    accepted: tuple[int, ...]  # ImageNet class indices that are a correct top-1
    what: str


PHOTOS: tuple[Photo, ...] = (
    Photo("chelsea", (281, 282, 283, 284, 285), "Chelsea the cat (domestic cat classes)"),
    Photo("coffee", (967, 968, 504), "a cup of coffee (espresso, cup, coffee mug)"),
    Photo("rocket", (657, 744, 812), "a rocket on its launch pad (missile, projectile, space shuttle)"),
    Photo("camera", (872, 759, 732), "the cameraman (tripod, reflex camera, Polaroid camera)"),
    Photo("stereo_motorcycle", (665, 670), "a motorcycle (moped, motor scooter)"),
)


@cache
def class_names() -> tuple[str, ...]:
    with resources.files("adaserve.models.effnet").joinpath("imagenet_classes.json").open() as f:
        return tuple(json.load(f))


def load_photo(name: str) -> np.ndarray:
    """An RGB uint8 photo from scikit-image (grey images are repeated to three channels)."""
    import skimage.data

    img = getattr(skimage.data, name)()
    if isinstance(img, tuple):  # stereo pairs: the left view
        img = img[0]
    img = np.asarray(img)
    if img.ndim == 2:
        img = np.repeat(img[..., None], 3, axis=2)
    return img[..., :3]


def preprocess(img: np.ndarray, size: int = IMAGE_SIZE, *, flip: bool = False,
               crop: float = 1.0) -> np.ndarray:
    """Centre square crop (``crop`` of the short side), resize, scale: float32 [3, size, size]."""
    from skimage.transform import resize

    h, w = img.shape[:2]
    s = max(1, int(min(h, w) * crop))
    top, left = (h - s) // 2, (w - s) // 2
    square = img[top:top + s, left:left + s].astype(np.float32)
    x = resize(square, (size, size), anti_aliasing=True, preserve_range=True).astype(np.float32)
    if flip:
        x = x[:, ::-1]
    return np.ascontiguousarray(((x - MEAN) / STD).transpose(2, 0, 1), dtype=np.float32)


@cache
def photo_set() -> tuple[np.ndarray, tuple[Photo, ...]]:
    """The labelled photos, preprocessed: float32 [N, 3, 224, 224] and their ``Photo`` records."""
    return np.stack([preprocess(load_photo(p.name)) for p in PHOTOS]), PHOTOS


@cache
def validation_set() -> tuple[np.ndarray, tuple[Photo, ...]]:
    """Each labelled photo in four views (full, flipped, 80 % crop, flipped crop): 20 images."""
    images, records = [], []
    for p in PHOTOS:
        img = load_photo(p.name)
        for flip in (False, True):
            for crop in (1.0, 0.8):
                images.append(preprocess(img, flip=flip, crop=crop))
                records.append(p)
    return np.stack(images), tuple(records)


def top1_correct(logits: np.ndarray, photos: tuple[Photo, ...]) -> np.ndarray:
    """Per-photo booleans: is the top-1 class one of the photo's accepted classes?"""
    top = np.asarray(logits).argmax(axis=1)
    return np.array([int(t) in p.accepted for t, p in zip(top, photos)])


def sample_photos(n: int, *, seed: int) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """``n`` preprocessed validation images (with repetition past 20) and their accepted labels."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    images, records = validation_set()
    idx = np.random.default_rng(seed).choice(len(images), size=n, replace=n > len(images))
    return images[idx], [records[i].accepted for i in idx]
