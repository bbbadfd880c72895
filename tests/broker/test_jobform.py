"""The columnar job form: docs/wire.md's table is its keys, a columnar map validates to exactly
the job its per-request map validates to, and a malformed one is refused with a reason."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest

from adaserve.broker.codec import decode, encode, peek
from adaserve.broker.errors import InvalidMessage
from adaserve.broker.jobform import COLUMN_KEYS, expand, is_columnar
from adaserve.broker.messages import Job, Request, job_in_columns
from adaserve.broker.settings import Limits
from adaserve.broker.tensors import Tensor, wire_of

WIRE = Path(__file__).resolve().parents[2] / "docs" / "wire.md"


def test_the_documented_table_is_the_keys_of_the_form() -> None:
    text = WIRE.read_text().split("**Jobs in columns.**", 1)[1]
    table = text.split("| field | type | meaning |", 1)[1].split("\n\n", 1)[0]
    names = {n for line in table.splitlines()[2:] for n in re.findall(r"`([a-z_]+)`", line.split("|")[1])}
    assert names == COLUMN_KEYS


def _head(**over: Any) -> dict[str, Any]:
    return {"v": 1, "type": "job", "id": "j", "app": "a", "model": "m", "reply_to": "c", "priority": 2, "run": "x",
            "slo": {"deadline_ms": 500.0, "min_accuracy": 0.25, "objective": "latency"}, **over}


def _columns(arrays: dict[str, np.ndarray], ids: list[str] | None = None, **over: Any) -> dict[str, Any]:
    n = len(next(iter(arrays.values())))
    return {**_head(**over), "request_ids": ids or [f"r{i}" for i in range(n)],
            "inputs": {k: wire_of(a) for k, a in arrays.items()}}


_CASES = [
    {"x": np.arange(6, dtype=np.float32).reshape(3, 2)},
    {"x": np.arange(2, dtype=np.float32).reshape(1, 2)},
    {"a": np.ones((4, 1, 3, 3), np.float16), "b": np.arange(8, dtype=np.int64).reshape(4, 2)},
    {"x": np.zeros((2, 0), np.uint8)},
    {"x": np.array([True, False])},
]


@pytest.mark.parametrize("arrays", _CASES)
def test_a_columnar_job_is_the_job_of_its_per_request_map(arrays: dict[str, np.ndarray]) -> None:
    body = _columns(arrays)
    assert is_columnar(body) and not is_columnar(_head(requests=[]))
    fast = Job.model_validate(body)
    slow = Job.model_validate(expand(body, Limits()))
    assert fast == slow and fast.model_dump() == slow.model_dump()
    # what the form builds without validating is what validation builds, attribute by attribute
    for a, b in zip(fast.requests, slow.requests):
        assert type(a) is Request and vars(a) == vars(b) and a.model_fields_set == b.model_fields_set
        for name, t in a.inputs.items():
            assert type(t) is Tensor and vars(t) == vars(b.inputs[name]) and t.model_fields_set == b.inputs[name].model_fields_set
    n = len(next(iter(arrays.values())))
    for j, req in enumerate(fast.requests):
        assert req.kind == "forward" and req.generation is None
        for name, a in arrays.items():
            assert np.array_equal(req.inputs[name].to_numpy(), a[j])
    # the job travels on as any job does: its per-request dump decodes to the same job
    assert decode(encode(fast), expect=Job) == fast and len(fast.requests) == n


@pytest.mark.parametrize("arrays", _CASES)
def test_the_job_built_without_the_pass_over_its_requests_is_the_validated_job(arrays: dict[str, np.ndarray]) -> None:
    body = _columns(arrays)
    built = job_in_columns(body, Limits())
    full = Job.model_validate(body, context={"limits": Limits()})
    assert built is not None and built == full
    assert vars(built).keys() == vars(full).keys() and built.model_fields_set == full.model_fields_set
    for a, b in zip(built.requests, full.requests):
        assert vars(a) == vars(b) and a.model_fields_set == b.model_fields_set


def test_the_requests_built_from_columns_have_every_field_a_request_has() -> None:
    # a field added to Request or Tensor must be filled in by the columnar form too
    req = Job.model_validate(_columns(_CASES[0])).requests[0]
    assert set(vars(req)) == set(Request.model_fields)
    assert set(vars(req.inputs["x"])) == set(Tensor.model_fields)


def test_a_columnar_job_round_trips_through_msgpack() -> None:
    raw = msgpack.packb(_columns(_CASES[2]), use_bin_type=True)
    assert decode(raw, expect=Job) == Job.model_validate(expand(_columns(_CASES[2]), Limits()))
    assert peek(raw)["request_ids"] == ["r0", "r1", "r2", "r3"] and peek(raw)["requests"] == 4


_X = {"x": np.zeros((3, 2), np.float32)}


def _broken(**change: Any) -> dict[str, Any]:
    body = _columns(_X)
    body.update(change)
    return body


def _tensor(**change: Any) -> dict[str, Any]:
    return {**wire_of(_X["x"]), **change}


@pytest.mark.parametrize(("body", "reason", "says"), [
    (_broken(requests=[]), "schema", "either requests or request_ids"),
    (_broken(request_ids=[]), "schema", "request_ids"),
    (_broken(request_ids="r0"), "schema", "request_ids"),
    (_broken(request_ids=["r0", "r1"]), "schema", "3 rows for 2 request ids"),
    (_broken(request_ids=["r0", "r1", "r1"]), "schema", "unique"),
    (_broken(request_ids=["r0", "r 1", "r2"]), "schema", "'r 1'"),
    (_broken(request_ids=["r0", 5, "r2"]), "schema", "request_ids"),
    (_broken(request_ids=["r0", "r1", "x" * 200]), "schema", "request_ids"),
    (_broken(inputs={}), "schema", "inputs"),
    (_broken(inputs=[1]), "schema", "inputs"),
    (_broken(inputs={"x": "abc"}), "schema", "inputs.x"),
    (_broken(inputs={"x": _tensor(extra=1)}), "schema", "inputs.x"),
    (_broken(inputs={"x": _tensor(dtype="complex64")}), "schema", "not allowed"),
    (_broken(inputs={"x": _tensor(shape=[])}), "schema", "shape"),
    (_broken(inputs={"x": _tensor(shape=[3, -2])}), "schema", "shape"),
    (_broken(inputs={"x": _tensor(shape=[3] + [1] * 9)}), "schema", "shape"),
    (_broken(inputs={"x": _tensor(shape=[3, 3])}), "schema", "need 36 bytes"),
    (_broken(inputs={"x": _tensor(data="abc")}), "schema", "data"),
    (_broken(inputs={"x": _tensor(), "y": _tensor(shape=[2, 3])}), "schema", "2 rows for 3"),
    (_broken(inputs={f"x{i}": _tensor() for i in range(9)}), "limit", "9 inputs"),
    (_broken(kind="generate"), "schema", "kind"),
    (_broken(inputs={"x": {"dtype": "uint8", "shape": [3, 1 << 20 | 1], "data": b""}}), "limit", "elements"),
])
def test_a_malformed_columnar_job_is_refused_with_a_reason(body: dict[str, Any], reason: str, says: str) -> None:
    with pytest.raises(InvalidMessage) as got:
        decode(msgpack.packb(body, use_bin_type=True), expect=Job)
    assert got.value.reason == reason and says in got.value.detail, got.value.detail


@pytest.mark.parametrize("body", [
    _broken(request_ids=["r0", "r1", "r1"]), _broken(request_ids=["r0", "r 1", "r2"]),
    _broken(inputs={"x": _tensor(dtype="complex64")}), _broken(model="no spaces"), _broken(priority=12),
    _broken(slo={"deadline_ms": -1.0}), _broken(reply_to=""), _broken(surplus=1), _broken(kind="generate"),
    _broken(v=2),
])
def test_a_job_in_columns_that_fails_a_check_is_left_to_the_full_validation(body: dict[str, Any]) -> None:
    # None, so that the full validation, whose error the planner and the SDK report, runs
    assert job_in_columns(body, Limits()) is None
    assert job_in_columns(_columns(_X), Limits()) is not None


def test_more_request_ids_than_a_job_may_hold_is_a_limit() -> None:
    lim = Limits(max_requests_per_job=4)
    body = _columns({"x": np.zeros((5, 2), np.float32)})
    with pytest.raises(InvalidMessage) as got:
        decode(msgpack.packb(body, use_bin_type=True), lim, expect=Job)
    assert got.value.reason == "limit" and "5 requests" in got.value.detail


@pytest.mark.parametrize("change", [
    {"dtype": "float64"},  # not allowed by these limits
    {"shape": [3, 4096], "data": bytes(3 * 4096 * 4)},  # a row over the element limit
])
def test_a_limit_refuses_the_same_input_in_either_form(change: dict[str, Any]) -> None:
    lim = Limits(allowed_dtypes=("float32",), max_tensor_elements=1024)
    body = _broken(inputs={"x": {**_tensor(), **change}})
    with pytest.raises(InvalidMessage) as columns:
        decode(msgpack.packb(body, use_bin_type=True), lim, expect=Job)
    per_request = {**_head(), "requests": [
        {"id": rid, "inputs": {"x": {**change, "dtype": change.get("dtype", "float32"),
                                     "shape": change.get("shape", [3, 2])[1:],
                                     "data": change.get("data", bytes(24))[:len(change.get("data", bytes(24))) // 3]}}}
        for rid in ("r0", "r1", "r2")]}
    with pytest.raises(InvalidMessage) as requests:
        decode(msgpack.packb(per_request, use_bin_type=True), lim, expect=Job)
    assert columns.value.reason == requests.value.reason


def test_the_planner_s_reading_views_the_columns_instead_of_copying_rows() -> None:
    from adaserve.broker.codec import validate

    body = _columns(_CASES[0])
    column = body["inputs"]["x"]["data"]
    viewed = validate(body, Limits(), expect=Job, views=True)
    copied = validate(body, Limits(), expect=Job)
    assert viewed == copied
    for v, c in zip(viewed.requests, copied.requests):
        mv, data = v.inputs["x"].data, c.inputs["x"].data
        assert type(data) is bytes and type(mv) is memoryview and mv.obj is column and bytes(mv) == data
