"""``make_job`` validates a job's request maps once and ``encode_checked`` encodes those very maps:
what is sent is what was validated, with the limits it is sent under, and a job changed since
(or checked against other limits) is validated again in full."""

from __future__ import annotations

import numpy as np
import pytest

from adaserve.broker import InvalidMessage, LimitExceeded, Tensor, load_limits
from adaserve.broker.codec import decode
from adaserve.broker.messages import Job, Request
from adaserve.producers.jobs import _validated_maps, build_job, encode_checked, make_job


def _job() -> Job:
    return make_job("m", [np.full(4, i, np.float32) for i in range(3)], 500.0, app="shop", run="r1")


def test_an_encoded_job_is_the_job_with_the_reply_channel_given() -> None:
    job = _job()
    lim = load_limits()
    assert _validated_maps(job, lim) is not None  # the maps make_job validated are what is encoded
    got = decode(encode_checked(job, lim, reply_to="client-7"), lim, expect=Job)
    assert got == job.model_copy(update={"reply_to": "client-7"})
    assert decode(encode_checked(job, lim), lim, expect=Job) == job


def test_the_job_s_own_fields_are_still_checked() -> None:
    with pytest.raises(InvalidMessage):
        encode_checked(_job(), load_limits(), reply_to="no spaces allowed")
    with pytest.raises(InvalidMessage):
        encode_checked(_job().model_copy(update={"priority": 12}), load_limits())


@pytest.mark.parametrize("reply_to", ["no spaces allowed", "", "x" * 129, "ok?"])
def test_a_reply_channel_the_job_would_refuse_raises_the_full_validation_s_error(reply_to: str) -> None:
    # the job itself is not validated again, its reply channel is, by the model's own constraints
    lim = load_limits()
    with pytest.raises(InvalidMessage) as fast:
        encode_checked(_job(), lim, reply_to=reply_to)
    with pytest.raises(InvalidMessage) as full:
        encode_checked(_job().model_copy(update={"run": "r1"}), lim, reply_to=reply_to)  # not make_job's
    assert (fast.value.reason, fast.value.detail.split(": ", 1)[1]) == \
        (full.value.reason, full.value.detail.split(": ", 1)[1])
    encode_checked(_job(), lim, reply_to="x" * 128)


def test_a_job_in_columns_is_the_job_the_full_validation_builds() -> None:
    lim = load_limits()
    rows = np.arange(12, dtype=np.float32).reshape(3, 4)
    job = make_job("m", {"x": rows}, 500.0, job_id="j", request_ids=["a", "b", "c"], app="shop", priority=3)
    body = {"id": "j", "app": "shop", "model": "m", "slo": {"deadline_ms": 500.0, "min_accuracy": 0.0,
            "objective": "latency"}, "reply_to": "unset", "priority": 3, "run": "",
            "request_ids": ["a", "b", "c"], "inputs": {"x": {"dtype": "float32", "shape": [3, 4], "data": rows.tobytes()}}}
    full = build_job(body, lim)
    assert job == full and job.model_fields_set == full.model_fields_set
    with pytest.raises(InvalidMessage) as got:  # a field of its own still refused, with the full validation's error
        make_job("m", {"x": rows}, 500.0, priority=12)
    assert "priority" in got.value.detail


def test_tighter_limits_than_the_job_was_built_with_are_applied_in_full() -> None:
    job = _job()
    with pytest.raises(LimitExceeded):
        encode_checked(job, load_limits(max_tensor_elements=3))


def test_requests_changed_after_the_job_was_built_are_validated_again() -> None:
    job = _job()
    bad = Request.model_construct(id="0", kind="forward", generation=None,
                                  inputs={"input": Tensor.model_construct(dtype="float32", shape=(4,), data=b"x")})
    job.requests[0] = bad  # a list is not frozen: a caller can still swap an element
    assert _validated_maps(job, load_limits()) is None
    with pytest.raises(InvalidMessage):
        encode_checked(job, load_limits())


def test_a_map_of_stacked_arrays_is_sent_in_columns_and_stands_for_its_rows() -> None:
    import msgpack

    rows = np.arange(12, dtype=np.float32).reshape(3, 4)
    lim = load_limits()
    columns = make_job("m", {"x": rows}, 500.0, job_id="j", request_ids=["a", "b", "c"])
    one_by_one = make_job("m", [{"x": r} for r in rows], 500.0, job_id="j", request_ids=["a", "b", "c"])
    assert columns == one_by_one
    raw = encode_checked(columns, lim, reply_to="me")
    body = msgpack.unpackb(raw)
    assert "requests" not in body and body["request_ids"] == ["a", "b", "c"]
    assert body["inputs"]["x"]["shape"] == [3, 4] and body["inputs"]["x"]["data"] == rows.tobytes()
    assert decode(raw, lim, expect=Job) == decode(encode_checked(one_by_one, lim, reply_to="me"), lim, expect=Job)


@pytest.mark.parametrize(("inputs", "kw", "says"), [
    ({"x": np.zeros((3, 4), np.float32), "y": np.zeros((2, 4), np.float32)}, {}, "rows"),
    ({"x": np.float32(1.0)}, {}, "not an array"),
    ({"x": [1, 2]}, {}, "not an array"),
    ({"x": np.zeros((3, 4), np.float32)}, {"request_ids": ["a"]}, "1 request ids for 3 rows"),
    ({"x": np.zeros((3, 4), np.float32)}, {"kind": "generate"}, "forward requests only"),
    ({"x": np.zeros((3, 4), np.complex64)}, {}, "not allowed"),
    ({}, {}, "one input or more"),
])
def test_a_bad_job_in_columns_is_refused_before_it_is_sent(inputs: dict[str, object], kw: dict[str, object],
                                                          says: str) -> None:
    with pytest.raises(InvalidMessage) as got:
        make_job("m", inputs, 500.0, **kw)  # type: ignore[arg-type]
    assert says in got.value.detail, got.value.detail


def test_a_job_in_columns_holding_nan_names_the_request() -> None:
    rows = np.zeros((3, 4), np.float32)
    rows[2, 1] = np.nan
    with pytest.raises(InvalidMessage) as got:
        encode_checked(make_job("m", {"x": rows}, 500.0), load_limits())
    assert got.value.reason == "non_finite" and "request 2" in got.value.detail
    encode_checked(make_job("m", {"x": rows}, 500.0), load_limits(allow_non_finite=("m",)))
