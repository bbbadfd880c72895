"""The batch a worker reads without pydantic (``workers.wire``) is the documented ``Batch``: the
same fields and defaults, the same values for what the planner builds, and what ``decode`` refuses
is refused with its reason. If ``BatchItem`` gains a field, these tests fail until ``WireItem``
has it too."""

from __future__ import annotations

import dataclasses
from typing import Any

import msgpack
import numpy as np
import pytest

from adaserve.broker import InvalidMessage, Tensor
from adaserve.broker.codec import decode, encode_map
from adaserve.broker.messages import Batch, BatchItem, Generation, Job, Placement, Plan, Request, Slo
from adaserve.broker.settings import default_limits
from adaserve.planner.core import Pending
from adaserve.planner.dispatch import build_batch
from adaserve.planner.state import HeldJob
from adaserve.workers.wire import WireBatch, WireItem, WireTensor, read_batch


def _fields(cls: type) -> dict[str, Any]:
    return {f.name: f.default for f in dataclasses.fields(cls)}


def test_the_light_types_have_the_wire_models_fields_and_defaults() -> None:
    item = {k: (None if f.is_required() else f.get_default(call_default_factory=True))
            for k, f in BatchItem.model_fields.items()}
    assert _fields(WireItem) == {k: dataclasses.MISSING if v is None and BatchItem.model_fields[k].is_required()
                                 else v for k, v in item.items()}
    assert set(_fields(WireBatch)) - {"body", "stacked"} == set(Batch.model_fields) - {"v", "type"}
    assert set(_fields(WireTensor)) == set(Tensor.model_fields)


def _built() -> bytes:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    reqs = [Request(id="r0", inputs={"audio": Tensor.from_numpy(x), "image": Tensor.from_numpy(x[:1])}),
            Request(id="r1", kind="generate", inputs={"tokens": Tensor.from_numpy(np.array([1, 2], np.int64))},
                    generation=Generation(max_new_tokens=4, temperature=0.5, seed=7))]
    job = Job(id="j", app="shop", model="m", requests=reqs, slo=Slo(deadline_ms=250.0), reply_to="c", run="run1")
    held = HeldJob(job, "1-0", 1000.0, 2, accuracy=0.93)
    items = [Pending("j", r.id, "shop", "m", 1.0, 1.25, payload=(held, r)) for r in reqs]
    plan = Plan(modalities=("audio",), variant="audio", placement=Placement(pool="gpu", part=1, next_pool="cpu"))
    return build_batch("m", items, 1003.0, plan)[1]


def _same(light: WireBatch, full: Batch) -> None:
    assert (light.id, light.model, light.plan, light.dispatched_ms) == (full.id, full.model, full.plan, full.dispatched_ms)
    assert len(light.items) == len(full.items)
    for a, b in zip(light.items, full.items):
        for name in BatchItem.model_fields:
            if name != "inputs":
                assert getattr(a, name) == getattr(b, name), name
        assert a.inputs.keys() == b.inputs.keys()
        for k, t in a.inputs.items():
            assert (t.dtype, t.shape, t.data) == (b.inputs[k].dtype, b.inputs[k].shape, b.inputs[k].data)
            np.testing.assert_array_equal(t.to_numpy(), b.inputs[k].to_numpy())


def test_a_planner_batch_reads_as_decode_reads_it() -> None:
    raw = _built()
    light, full = read_batch(raw), decode(raw, expect=Batch)
    _same(light, full)
    assert light.full() == full


def _body() -> dict[str, Any]:
    return msgpack.unpackb(_built(), raw=False)


def _changed(body: dict[str, Any], key: str, at: int | str, change: dict[str, Any]) -> dict[str, Any]:
    """``body`` with ``change`` merged into ``body[key][at]``."""
    body[key][at] = {**body[key][at], **change}
    return body


def _broken() -> list[dict[str, Any]]:
    out = []
    for change in ({"v": 2}, {"type": "job"}, {"items": "x"}, {"extra": 1}, {"plan": {"variant": 3}}):
        out.append({**_body(), **change})
    for change in ({"job_id": None}, {"inputs": []}, {"kind": "other"}, {"submitted_ms": "x"}, {"unknown": 1},
                   {"generation": {"temperature": -1}}, {"inputs": {"a": {"dtype": "float32", "shape": [2], "data": b"x"}}},
                   {"inputs": {"a": {"dtype": "complex64", "shape": [1], "data": b"12345678"}}},
                   {"inputs": {"a": {"dtype": "float32", "shape": [-1], "data": b""}}},
                   {"inputs": {"a": {"dtype": "float32", "shape": [1 << 21], "data": b""}}}):
        out.append(_changed(_body(), "items", 0, change))
    body = _body()
    del body["items"][1]["deadline_ms"]
    out.append(body)
    return out


@pytest.mark.parametrize("body", _broken())
def test_what_decode_refuses_is_refused_with_its_reason(body: dict[str, Any]) -> None:
    raw = encode_map(body)
    with pytest.raises(InvalidMessage) as want:
        decode(raw, default_limits(), expect=Batch)
    with pytest.raises(InvalidMessage) as got:
        read_batch(raw)
    assert (type(got.value), got.value.reason) == (type(want.value), want.value.reason)


def _columnar() -> bytes:
    """Two jobs whose forward requests interleave in the scheduler's order, every input alike."""
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    pend = []
    for jid, acc in (("j1", 0.9), ("j2", None)):
        reqs = [Request(id=f"{jid}r{i}", inputs={"audio": Tensor.from_numpy(x[i] + len(jid)),
                                                 "mask": Tensor.from_numpy(np.array([i, 1], np.uint8))})
                for i in range(2)]
        job = Job(id=jid, app="shop", model="m", requests=reqs, slo=Slo(deadline_ms=250.0), reply_to="c" + jid,
                  run="run1" if acc else "")
        held = HeldJob(job, "1-0", 1000.0, 2, accuracy=acc)
        pend.append([Pending(jid, r.id, "shop", "m", 1.0, 1.25, payload=(held, r)) for r in reqs])
    items = [pend[0][0], pend[1][0], pend[0][1], pend[1][1]]
    return build_batch("m", items, 1003.0, Plan())[1]


def test_a_columnar_planner_batch_reads_as_decode_reads_it_and_as_one_buffer_per_input() -> None:
    raw = _columnar()
    body = msgpack.unpackb(raw, raw=False)
    assert "items" not in body and [j["request_ids"] for j in body["jobs"]] == [["j1r0", "j1r1"], ["j2r0", "j2r1"]]
    light, full = read_batch(raw), decode(raw, expect=Batch)
    _same(light, full)
    assert light.full() == full
    assert light.stacked is not None and light.stacked["audio"].shape == (4, 3)
    assert light.stacked["audio"].data == b"".join(it.inputs["audio"].data for it in full.items)
    assert [it.job_accuracy for it in light.items] == [0.9, 0.9, None, None]


def _columnar_broken() -> list[dict[str, Any]]:
    def body() -> dict[str, Any]:
        return msgpack.unpackb(_columnar(), raw=False)

    out = [{**body(), "extra": 1}, {**body(), "jobs": "x"}, {**body(), "jobs": []}, {**body(), "inputs": []}]
    for change in ({"job_id": None}, {"unknown": 1}, {"submitted_ms": "x"}, {"request_ids": [1, "a"]},
                   {"request_ids": "ab"}, {"job_accuracy": "high"}):
        out.append(_changed(body(), "jobs", 0, change))
    for change in ({"shape": [3, 3]}, {"shape": [4, -1]}, {"shape": [4, 1 << 21]}, {"dtype": "complex64"},
                   {"data": b"x" * 7}, {"data": b"x" * 24}, {"extra": 1}, {"shape": [4] + [1] * 9}):
        out.append(_changed(body(), "inputs", "audio", change))
    b = body()
    del b["jobs"][1]["deadline_ms"]
    out.append(b)
    return out


@pytest.mark.parametrize("body", _columnar_broken())
def test_what_decode_refuses_of_a_columnar_batch_is_refused_with_its_reason(body: dict[str, Any]) -> None:
    test_what_decode_refuses_is_refused_with_its_reason(body)
