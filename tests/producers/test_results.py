"""A job's results: summaries read from the filed maps agree with those of validated results."""

from __future__ import annotations

import pytest

from adaserve.broker import InvalidMessage, Result, Timings
from adaserve.producers.results import JobResult


def _res(rid: str, status: str, total: float, pred: int | None = None, reason: str = "") -> Result:
    return Result(job_id="j", request_id=rid, status=status, reason=reason, prediction=pred,
                  timings=Timings(submitted_ms=0.0, finished_ms=total, total_ms=total))


def _pair(results: list[Result], deadline: float) -> tuple[JobResult, JobResult]:
    head = ("j", "a", "m", "r", deadline, 5.0)
    return (JobResult(*head, results=results),
            JobResult(*head, maps=[r.model_dump(mode="python") for r in results]))


@pytest.mark.parametrize("deadline", [50.0, 500.0])
def test_summaries_from_maps_equal_those_from_results(deadline: float) -> None:
    results = [_res("0", "completed", 10, 3), _res("1", "completed", 150, 4),
               _res("2", "expired", 100, reason="deadline"), _res("3", "failed", 20, reason="")]
    eager, lazy = _pair(results, deadline)
    for prop in ("counts", "completed", "ok", "latency_ms", "deadline_met", "on_time", "predictions", "reasons"):
        assert getattr(lazy, prop) == getattr(eager, prop), prop
    assert lazy.results == tuple(results) and lazy == eager and len(lazy) == 4


def test_results_are_validated_only_when_asked_for() -> None:
    (ok,) = [_res("0", "completed", 10, 1).model_dump(mode="python")]
    bad = {**ok, "request_id": "1", "outputs": {"y": {"dtype": "float32", "shape": [2], "data": b"x"}}}
    job = JobResult("j", "a", "m", "r", 100.0, 0.0, maps=[ok, bad])
    assert job.completed == 2 and job.predictions == [1, 1]
    with pytest.raises(InvalidMessage):
        _ = job.results


def test_one_of_results_or_maps() -> None:
    with pytest.raises(TypeError):
        JobResult("j", "a", "m", "r", 1.0, 0.0)


def _columns_body(ids: list[str], preds: list[int | None]) -> dict[str, object]:
    """A ``columns`` reply entry as a worker writes it (docs/wire.md), two outputs of one row each."""
    import numpy as np

    n = len(ids)
    probs = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    return {"v": 1, "type": "columns", "job_id": "j", "app": "a", "model": "m", "plan": None, "worker": "w",
            "job_accuracy": None, "status": "completed", "request_ids": ids, "prediction": preds,
            "confidence": [0.5] * n, "exit": [None] * n,
            "outputs": {"probs": {"dtype": "float32", "shape": [n, 3], "data": probs.tobytes()}},
            "timings": {"submitted_ms": 1.0, "dispatched_ms": 2.0, "started_ms": 3.0, "finished_ms": 9.0,
                        "total_ms": 8.0, "queue_ms": [1.0] * n, "exec_ms": [2.0 + i for i in range(n)]}}


@pytest.mark.parametrize("deadline", [5.0, 500.0])
def test_summaries_from_a_columns_entry_equal_those_from_its_maps(deadline: float) -> None:
    from adaserve.broker.replies import check_columns, expand_columns

    body = _columns_body(["r0", "r1", "r2"], [3, None, 1])
    head = ("j", "a", "m", "r", deadline, 5.0)
    whole, maps = JobResult(*head, columns=check_columns(body)), JobResult(*head, maps=expand_columns(body))
    for prop in ("counts", "completed", "ok", "latency_ms", "deadline_met", "on_time", "predictions", "reasons",
                 "statuses"):
        assert getattr(whole, prop) == getattr(maps, prop), prop
    assert len(whole) == 3 and whole.results == maps.results and whole == maps
    assert [r.outputs["probs"].to_numpy().tolist() for r in whole.results] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    with pytest.raises(TypeError):
        JobResult(*head, maps=expand_columns(body), columns=check_columns(body))


def test_a_job_filed_from_a_result_and_parts_of_columns_entries_reads_as_its_maps() -> None:
    """A job split over batches: one request's own ``result`` map, the rest from two ``columns``
    entries (one delivered twice), filed as references; the same job as its maps filed one by one."""
    from adaserve.broker.replies import check_columns, expand_columns
    from adaserve.producers.tracking import Tracked

    first = _columns_body(["r0", "r1"], [3, 4])
    second = _columns_body(["r3", "r2"], [6, 5])
    lone = {**expand_columns(_columns_body(["r4"], [7]))[0]}
    t = Tracked("j", "a", "m", "r", 500.0, ("r0", "r1", "r2", "r3", "r4"))
    assert not t.add_columns(check_columns(first)) and not t.add(lone)
    assert not t.add_columns(check_columns(first)) and t.duplicates == 2  # a redelivery: first wins
    assert t.add_columns(check_columns(second)) and t.result is not None
    one_by_one = Tracked("j", "a", "m", "r", 500.0, ("r0", "r1", "r2", "r3", "r4"))
    for m in expand_columns(first) + expand_columns(second) + [lone]:
        one_by_one.add(m)
    assert one_by_one.result is not None
    for prop in ("counts", "completed", "ok", "latency_ms", "deadline_met", "on_time", "predictions", "reasons",
                 "statuses"):
        assert getattr(t.result, prop) == getattr(one_by_one.result, prop), prop
    assert t.result.predictions == [3, 4, 5, 6, 7] and t.result.results == one_by_one.result.results
