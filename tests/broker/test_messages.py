"""Rules of the wire models that span fields."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from adaserve.broker import Request, Tensor
from adaserve.broker.messages import Generation


def _tokens() -> dict[str, Tensor]:
    return {"tokens": Tensor.from_numpy(np.arange(3, dtype=np.int64))}


def test_generation_settings_belong_to_generate_requests() -> None:
    assert Request(id="r", kind="generate", inputs=_tokens(), generation=Generation(max_new_tokens=4)).generation
    assert Request(id="r", kind="generate", inputs=_tokens()).generation is None  # the model's defaults
    with pytest.raises(ValidationError, match="use kind 'generate'"):
        Request(id="r", inputs=_tokens(), generation=Generation())


@pytest.mark.parametrize("bad", [{"max_new_tokens": 0}, {"temperature": -0.1}, {"seed": -1}, {"top_k": 3}])
def test_generation_settings_are_bounded(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        Generation(**bad)
