"""uint8 photos through the real pipeline: effnet-lite0's manifest declares its normalisation, so the
worker takes pixels (a quarter of float32's bytes) and answers as for the float32 photos."""

from __future__ import annotations

import numpy as np
import pytest

from adaserve.broker import Settings
from adaserve.models.datasets import sample_inputs
from adaserve.models.effnet.photos import MEAN, PHOTOS, STD
from adaserve.producers import Client, make_job

pytestmark = pytest.mark.slow
MODEL = "effnet-lite0"


def test_uint8_photos_get_the_answers_of_their_float32_normalisation(effnet_settings: Settings, pipeline) -> None:
    images, _ = sample_inputs(MODEL, len(PHOTOS), seed=0)
    pixels = [{"image": np.clip(np.rint(x["image"] * STD + MEAN), 0, 255).astype(np.uint8)} for x in images]
    floats = [{"image": ((p["image"].astype(np.float32) - MEAN) / STD).astype(np.float32)} for p in pixels]
    assert pixels[0]["image"].nbytes * 4 == floats[0]["image"].nbytes
    with pipeline({"cpu": (MODEL,)}, settings_=effnet_settings), Client(effnet_settings) as c:
        a = c.submit(make_job(MODEL, pixels, 60_000)).result(120)
        b = c.submit(make_job(MODEL, floats, 60_000)).result(120)
    assert a.ok and b.ok, (a.reasons, b.reasons)
    assert a.predictions == b.predictions
    for x, y in zip(a.results, b.results):
        np.testing.assert_array_equal(x.outputs["probs"].to_numpy(), y.outputs["probs"].to_numpy())
