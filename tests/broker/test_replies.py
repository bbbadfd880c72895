"""Reading reply entries: both forms, and what is not a result is refused with the reason."""

from __future__ import annotations

import msgpack
import pytest

from adaserve.broker import InvalidMessage, Result, Timings
from adaserve.broker.codec import encode, results_entry
from adaserve.broker.replies import read_reply, read_reply_maps, results_of


def _res(rid: str, status: str = "completed") -> Result:
    return Result(job_id="j", request_id=rid, status=status, reason="" if status == "completed" else "why",
                  timings=Timings(submitted_ms=1.0, finished_ms=2.0, total_ms=1.0))


def test_both_forms_read_back_in_order() -> None:
    one = [_res("r0")]
    many = [_res(f"r{i}", "expired" if i % 2 else "completed") for i in range(40)]  # past msgpack's fixarray
    assert read_reply(encode(one[0])) == one
    assert read_reply(results_entry("j", [encode(x) for x in many])) == many


@pytest.mark.parametrize("body", [
    {"v": 1, "type": "results", "job_id": "j", "results": "not a list"},
    {"v": 1, "type": "results", "job_id": "j", "results": [{"v": 1, "type": "result", "job_id": "j"}]},
    {"v": 1, "type": "job", "id": "j"},
    {"v": 1, "type": "result", "job_id": "j", "request_id": "r", "status": "completed", "timings": {"x": 1}},
])
def test_what_is_not_a_result_is_refused_with_the_reason(body: dict) -> None:
    with pytest.raises(InvalidMessage):
        read_reply(msgpack.packb(body))


def test_maps_carry_what_a_summary_reads_and_validate_to_the_same_results() -> None:
    many = [_res(f"r{i}", "expired" if i % 3 else "completed") for i in range(20)]
    maps = read_reply_maps(results_entry("j", [encode(x) for x in many]))
    assert [m["request_id"] for m in maps] == [r.request_id for r in many]
    assert results_of(maps) == many


@pytest.mark.parametrize("change", [
    {"status": "done"}, {"request_id": 7}, {"prediction": True}, {"prediction": "3"}, {"reason": None},
    {"timings": {"submitted_ms": 1.0}}, {"v": 2}, {"type": "job"},
])
def test_a_result_whose_summary_fields_are_wrong_is_refused_on_arrival(change: dict) -> None:
    body = {**_res("r0").model_dump(mode="python"), **change}
    with pytest.raises(InvalidMessage):
        read_reply_maps(results_entry("j", [msgpack.packb(body)]))


def test_the_rest_of_a_map_is_validated_when_results_are_asked_for() -> None:
    body = {**_res("r0").model_dump(mode="python"), "outputs": {"x": {"dtype": "float32", "shape": [2], "data": b"1"}}}
    maps = read_reply_maps(msgpack.packb(body))  # the summary fields are fine
    with pytest.raises(InvalidMessage):
        results_of(maps)
