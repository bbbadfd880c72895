"""effnet-lite0: the two parts reproduce the whole network, and the photos get their labels."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from rich.progress import Progress

from adaserve.models.effnet.export import SPLIT_AFTER, load_pretrained, split
from adaserve.models.effnet.photos import PHOTOS, class_names, photo_set, preprocess, top1_correct


@pytest.fixture(scope="module")
def net() -> torch.nn.Module:
    return load_pretrained()


def test_class_names_are_the_1000_imagenet_classes() -> None:
    names = class_names()
    assert len(names) == 1000
    assert names[281] == "tabby" and names[285] == "Egyptian cat" and names[967] == "espresso"


def test_preprocess_scales_like_efficientnet_lite() -> None:
    img = np.full((40, 60, 3), 255, np.uint8)
    x = preprocess(img, size=16)
    assert x.shape == (3, 16, 16) and x.dtype == np.float32
    np.testing.assert_allclose(x, (255 - 127) / 128, rtol=1e-5)


def test_split_equals_whole_and_photos_get_their_labels(net: torch.nn.Module) -> None:
    images, photos = photo_set()
    part1, part2 = split(net, SPLIT_AFTER)
    with torch.no_grad():
        x = torch.from_numpy(images)
        whole = net(x).numpy()
        mid = part1(x)
        chained = part2(mid).numpy()
    assert tuple(mid.shape[1:]) == (192, 7, 7)
    assert np.abs(chained - whole).max() <= 1e-4
    assert top1_correct(whole, photos).all(), [class_names()[i] for i in whole.argmax(1)]
    assert len(photos) == len(PHOTOS) >= 5


def test_split_point_is_checked(net: torch.nn.Module) -> None:
    with pytest.raises(ValueError):
        split(net, 0)
    with pytest.raises(ValueError):
        split(net, len(net._blocks))


@pytest.mark.slow
def test_build_exports_parts_that_chain_to_the_whole(tmp_path: Path) -> None:
    """The full ONNX build (about 30 s, 37 MB written): split = whole through onnxruntime."""
    import onnxruntime as ort

    from adaserve.models.effnet import build

    with Progress(disable=True) as progress:
        info = build(tmp_path, tiny=True, seed=0, progress=progress)
    assert [v.name for v in info.variants] == ["whole", "part1", "part2"]
    assert info.variant("part1").extra == {**info.variant("part1").extra, "part": 1, "next": "part2"}
    assert info.train["metrics"]["split_max_abs_diff"] <= 1e-4
    p1 = info.variant("part1").extra
    assert p1["split_after_block"] == 15 and p1["fp16_ok"]["top1_agreement"] == 1.0
    assert p1["intermediate_dtype"] == ("float16" if p1["fp16_ok"]["ok"] else "float32")
    assert info.variant("whole").inputs["image"].normalize is not None
    assert (tmp_path / "node_times.json").is_file()
    assert info.variant("whole").quality == 1.0
    assert set(info.hashes) == {"whole.onnx", "part1.onnx", "part2.onnx"}
    images, photos = photo_set()
    sess = {n: ort.InferenceSession(str(tmp_path / f"{n}.onnx")) for n in ("whole", "part1", "part2")}
    whole = sess["whole"].run(None, {"image": images})[0]
    mid = sess["part1"].run(None, {"image": images})[0]
    chained = sess["part2"].run(None, {"intermediate": mid})[0]
    assert np.abs(chained - whole).max() <= 1e-4
    assert top1_correct(chained, photos).all()
    json.dumps(info.model_dump(mode="json"))
