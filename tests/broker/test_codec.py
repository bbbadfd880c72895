import msgpack
import numpy as np
import pytest

from adaserve.broker import (
    Batch,
    BatchItem,
    InvalidMessage,
    Job,
    LimitExceeded,
    Plan,
    Request,
    Result,
    Slo,
    Tensor,
    Timings,
    decode,
    encode,
    load_limits,
    peek,
)
from adaserve.broker.codec import encode_per_request
from adaserve.broker.events import BatchFinished, RequestTiming


def _job(**kw: object) -> Job:
    req = Request(id="r1", inputs={"audio": Tensor.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))})
    return Job(id="j1", model="m", requests=[req], slo=Slo(deadline_ms=250), reply_to="c1", **kw)  # type: ignore[arg-type]


def test_job_round_trip_keeps_tensor_bytes() -> None:
    job = _job(app="a", run="r")
    back = decode(encode(job), expect=Job)
    assert back == job
    np.testing.assert_array_equal(back.requests[0].inputs["audio"].to_numpy(), job.requests[0].inputs["audio"].to_numpy())


def test_raw_map_from_another_language_decodes() -> None:
    body = {"v": 1, "type": "job", "id": "x", "model": "m", "reply_to": "c",
            "slo": {"deadline_ms": 100}, "requests": [{"id": "a", "inputs": {
                "audio": {"dtype": "float32", "shape": [2], "data": np.ones(2, "<f4").tobytes()}}}]}
    job = decode(msgpack.packb(body), expect=Job)
    assert job.requests[0].inputs["audio"].to_numpy().tolist() == [1.0, 1.0]


def test_other_messages_round_trip() -> None:
    t = Tensor.from_numpy(np.zeros(2, np.float32))
    batch = Batch(id="b", model="m", plan=Plan(), dispatched_ms=1.0, items=[BatchItem(
        job_id="j", request_id="r", app="a", reply_to="c", inputs={"x": t}, submitted_ms=0, deadline_ms=5)])
    res = Result(job_id="j", request_id="r", status="completed", timings=Timings(submitted_ms=0, finished_ms=1, total_ms=1))
    ev = BatchFinished(ts=1, batch_id="b", pool="cpu", worker="w", model="m", size=1, exec_ms=1,
                       items=[RequestTiming(job_id="j", request_id="r", app="a", status="completed", queue_ms=0,
                                            exec_ms=1, total_ms=1)])
    for m in (batch, res, ev):
        assert decode(encode(m)) == m


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"\xc1\x00", "undecodable"),
        (msgpack.packb([1, 2]), "schema"),
        (msgpack.packb({"v": 2, "type": "job"}), "version"),
        (msgpack.packb({"v": 1, "type": "nope"}), "schema"),
        (msgpack.packb({"v": 1, "type": "job", "id": "j"}), "schema"),
    ],
)
def test_bad_bytes_raise_one_error_type(raw: bytes, reason: str) -> None:
    with pytest.raises(InvalidMessage) as exc:
        decode(raw)
    assert exc.value.reason == reason


def test_limits() -> None:
    lim = load_limits(max_tensor_elements=4, max_requests_per_job=1, max_message_bytes=2048)
    with pytest.raises(InvalidMessage, match="exceeds the limit of 4") as exc:
        decode(encode(_job()), lim)
    assert exc.value.reason == "limit"
    with pytest.raises(LimitExceeded):
        decode(b"\x00" * 4096, lim)
    body = _job().model_dump()
    body["slo"]["deadline_ms"] = 10**9
    with pytest.raises(InvalidMessage, match="outside"):
        decode(msgpack.packb(body))
    body = _job().model_dump()
    body["requests"][0]["inputs"]["audio"]["dtype"] = "object"
    with pytest.raises(InvalidMessage, match="not allowed"):
        decode(msgpack.packb(body))
    body = _job().model_dump()
    body["requests"][0]["inputs"]["audio"]["data"] = b"123"
    with pytest.raises(InvalidMessage, match="data holds 3 bytes"):
        decode(msgpack.packb(body))


def test_peek_finds_ids_of_an_invalid_job() -> None:
    body = _job().model_dump()
    body["slo"] = "soon"
    info = peek(msgpack.packb(body))
    assert info["id"] == "j1" and info["reply_to"] == "c1" and info["request_ids"] == ["r1"]
    assert peek(b"\xc1") == {}


def test_the_reason_code_comes_from_the_error_type_not_its_text() -> None:
    # A schema error whose offending value reads like a limit: the text search this replaced
    # saw "exceeds" in pydantic's rendering of the input and answered "limit".
    body = _job().model_dump()
    body["slo"] = "the deadline exceeds anything outside reason"
    with pytest.raises(InvalidMessage) as exc:
        decode(msgpack.packb(body))
    assert exc.value.reason == "schema" and not isinstance(exc.value, LimitExceeded)
    body = _job().model_dump()
    body["requests"][0]["id"] = "exceeds outside!"  # a bad id pattern, with the words in the value
    with pytest.raises(InvalidMessage) as exc:
        decode(msgpack.packb(body))
    assert exc.value.reason == "schema"


def _more_requests(b: dict) -> None:
    b["requests"].extend(dict(b["requests"][0], id=f"x{i}") for i in range(2))


def _more_inputs(b: dict) -> None:
    b["requests"][0]["inputs"].update({f"m{i}": b["requests"][0]["inputs"]["audio"] for i in range(2)})


@pytest.mark.parametrize(("limits", "mutate", "says"), [
    ({}, lambda b: b["slo"].update(deadline_ms=10**9), "deadline_ms 1000000000.0 outside [1.0, 3600000.0]"),
    ({"max_requests_per_job": 2}, _more_requests, "3 requests exceed the limit of 2 per job"),
    ({"max_modalities": 2}, _more_inputs, "3 inputs exceed the limit of 2 modalities"),
    ({"max_tensor_elements": 4}, lambda b: None, "tensor of 6 elements exceeds the limit of 4"),
])
def test_each_breached_limit_is_reason_limit_with_a_plain_message(limits: dict, mutate, says: str) -> None:
    body = _job().model_dump()
    mutate(body)
    with pytest.raises(InvalidMessage) as exc:
        decode(msgpack.packb(body), load_limits(**limits))
    assert exc.value.reason == "limit" and says in exc.value.detail, exc.value.detail
    assert "Value error" not in exc.value.detail


def test_a_validator_value_error_is_schema_without_pydantic_labels() -> None:
    body = _job().model_dump()
    body["requests"][0]["generation"] = {"max_new_tokens": 3}  # on a forward request
    with pytest.raises(InvalidMessage) as exc:
        decode(msgpack.packb(body))
    assert exc.value.reason == "schema"
    assert exc.value.detail == "requests.0: 'generation' is set but kind is 'forward'; use kind 'generate'"


def test_nesting_deeper_than_the_unpacker_allows_is_undecodable_and_says_why() -> None:
    raw = b"\x81" + msgpack.packb("deep") + b"\x91" * 5000 + b"\x90"
    with pytest.raises(InvalidMessage) as exc:
        decode(raw)
    assert exc.value.reason == "undecodable" and "nested deeper" in exc.value.detail


@pytest.mark.parametrize("extra", [{}, {"outputs": {}, "prediction": 3, "worker": "w"}])
def test_one_result_per_request_is_the_result_with_each_request_id(extra: dict) -> None:
    res = Result(job_id="j", request_id="first", model="m", status="expired", reason="too late",
                 timings=Timings(submitted_ms=1.0, finished_ms=2.0, total_ms=1.0), **extra)
    raws = encode_per_request(res, ["a", "b-1", "x" * 40])
    assert [decode(r, expect=Result) for r in raws] == [res.model_copy(update={"request_id": i})
                                                       for i in ("a", "b-1", "x" * 40)]
    assert msgpack.unpackb(raws[0]) == msgpack.unpackb(encode(res.model_copy(update={"request_id": "a"})))
