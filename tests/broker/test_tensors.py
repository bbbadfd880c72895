"""Which wire dtypes may feed which model input dtypes (one rule for the planner and the worker)."""

import pytest

from adaserve.broker.tensors import dtype_fits


@pytest.mark.parametrize(("sent", "wanted", "fits"), [
    ("float32", "float32", True), ("float16", "float32", True), ("float64", "float32", True),
    ("uint8", "int64", True), ("int32", "int64", True), ("int64", "int8", False), ("uint64", "int64", False),
    ("uint8", "float32", False), ("int64", "float32", False), ("float32", "int64", False), ("bool", "float32", False),
])
def test_dtype_fits_within_a_kind_and_never_wraps(sent: str, wanted: str, fits: bool) -> None:
    assert dtype_fits(sent, wanted) is fits
