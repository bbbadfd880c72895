"""NaN and ±Inf in float inputs: rejected as ``non_finite`` unless the model is allowed them."""

from __future__ import annotations

import numpy as np
import pytest

from adaserve.broker import InvalidMessage, Job, Request, Slo, Tensor, load_limits
from adaserve.broker.finite import check_finite, is_finite


def _job(arr: np.ndarray, model: str = "m") -> Job:
    return Job(id="j", model=model, reply_to="c", slo=Slo(deadline_ms=100),
               requests=[Request(id="ok", inputs={"a": Tensor.from_numpy(np.zeros(3, np.float32))}),
                         Request(id="bad", inputs={"a": Tensor.from_numpy(arr)})])


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_a_non_finite_value_anywhere_rejects_the_job(dtype: str, value: float) -> None:
    arr = np.zeros((2, 3), dtype)
    arr[1, 2] = value
    assert not is_finite(Tensor.from_numpy(arr))
    with pytest.raises(InvalidMessage) as exc:
        check_finite(_job(arr), load_limits())
    assert exc.value.reason == "non_finite" and "request bad" in exc.value.detail and "'a'" in exc.value.detail


def test_all_nan_is_rejected_and_finite_extremes_are_not() -> None:
    with pytest.raises(InvalidMessage, match="NaN"):
        check_finite(_job(np.full(4, np.nan, np.float32)), load_limits())
    big = np.array([np.finfo(np.float16).max, -np.finfo(np.float16).max, 0.0], np.float16)
    check_finite(_job(big), load_limits())


def test_integers_and_empty_tensors_are_finite() -> None:
    assert is_finite(Tensor.from_numpy(np.array([-1, 2**62], np.int64)))
    assert is_finite(Tensor.from_numpy(np.zeros((0, 3), np.float32)))


def test_listed_models_take_non_finite_inputs() -> None:
    arr = np.array([np.nan, np.inf], np.float32)
    check_finite(_job(arr, model="nan-ok"), load_limits(allow_non_finite=("nan-ok",)))
    with pytest.raises(InvalidMessage):
        check_finite(_job(arr, model="other"), load_limits(allow_non_finite=("nan-ok",)))


def test_the_allow_list_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADASERVE_LIMIT_ALLOW_NON_FINITE", "a-model, b-model,")
    assert load_limits().allow_non_finite == ("a-model", "b-model")
