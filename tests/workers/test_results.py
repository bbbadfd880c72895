"""The maps the worker encodes by hand are exactly the wire models: they validate and round-trip."""

from __future__ import annotations

import numpy as np
import pytest

from adaserve.broker import Tensor
from adaserve.broker.codec import decode
from adaserve.broker.events import TIMING_COLUMNS, BatchFinished, RequestTiming, timing_rows
from adaserve.broker.messages import Batch, BatchItem, Placement, Plan, Result
from adaserve.workers.execute import BatchOutcome, ColumnItems, Columns, ItemOutcome, WireRow
from adaserve.workers.results import failed_from_raw, finished, finished_columns


def _batch() -> Batch:
    items = [BatchItem(job_id="j1", request_id=f"r{i}", app="app", reply_to="c1", run="run1",
                       inputs={"a": Tensor.from_numpy(np.zeros(2, np.float32))}, submitted_ms=1000.0,
                       deadline_ms=5000.0) for i in range(2)]
    plan = Plan(modalities=("a",), variant="exit2", exit=2, placement=Placement(pool="cpu"), priority=0.5)
    return Batch(id="b1", model="m", plan=plan, items=items, dispatched_ms=1002.0)


def test_finished_results_and_event_validate() -> None:
    batch = _batch()
    logits = np.array([0.1, 2.0, -1.0], np.float32)
    outcome = BatchOutcome("exit2", [
        ItemOutcome("completed", prediction=1, confidence=0.8, exit=1,
                    outputs={"logits": WireRow("float32", [3], logits.tobytes())}, exec_ms=3.0),
        ItemOutcome("failed", reason="bad_input: shape"),
    ], started_ms=1010.0, finished_ms=1014.0, exec_ms=3.5)
    packed, event = finished(batch, outcome, worker="w1", pool="cpu", device="cpu")
    ok, bad = (decode(p.raw, expect=Result) for p in packed)
    assert [(p.job_id, p.request_id, p.status, p.reply_to) for p in packed] == [
        ("j1", "r0", "completed", "c1"), ("j1", "r1", "failed", "c1")]
    assert ok.plan == batch.plan and ok.worker == "w1" and ok.prediction == 1 and ok.exit == 1
    np.testing.assert_array_equal(ok.outputs["logits"].to_numpy(), logits)
    t = ok.timings
    assert (t.submitted_ms, t.dispatched_ms, t.started_ms, t.finished_ms, t.queue_ms, t.total_ms) == (
        1000.0, 1002.0, 1010.0, 1014.0, 10.0, 14.0)
    assert bad.reason == "bad_input: shape" and bad.exit is None and bad.timings.started_ms == 1014.0
    ev = decode(event)
    assert isinstance(ev, BatchFinished)
    assert (ev.batch_id, ev.variant, ev.size, ev.exec_ms, ev.worker) == ("b1", "exit2", 2, 3.5, "w1")
    assert [(i.request_id, i.status, i.run, i.exit) for i in ev.items] == [
        ("r0", "completed", "run1", 1), ("r1", "failed", "run1", None)]


def test_plan_exit_is_reported_when_the_runner_gives_none() -> None:
    outcome = BatchOutcome("exit2", [ItemOutcome("completed", prediction=0), ItemOutcome("completed", prediction=1)],
                           1.0, 2.0, 1.0)
    packed, _ = finished(_batch(), outcome, worker="w", pool="cpu", device="cpu")
    assert [decode(p.raw, expect=Result).exit for p in packed] == [2, 2]


def test_failed_from_raw_keeps_only_addressable_items() -> None:
    body = {"model": "m", "items": [
        {"job_id": "j", "request_id": "r1", "reply_to": "c", "submitted_ms": 5.0, "app": "a"},
        {"job_id": "j", "request_id": "r1", "reply_to": "c"},  # duplicate
        {"job_id": "j", "request_id": "bad id!", "reply_to": "c"},
        "junk",
    ]}
    out = failed_from_raw(body, "schema: broken", worker="w", now_ms=10.0)
    assert [(r.request_id, r.status, r.app, r.timings.total_ms, reply) for r, reply in out] == [
        ("r1", "failed", "a", 5.0, "c")]
    assert failed_from_raw({"items": "nope"}, "x", worker="w", now_ms=1.0) == []


def test_failed_from_raw_reads_the_requests_a_columnar_batch_names() -> None:
    body = {"model": "m", "jobs": [
        {"job_id": "j", "app": "a", "reply_to": "c", "submitted_ms": 5.0, "request_ids": ["r1", "r2", "bad id!"]},
        {"job_id": "k", "reply_to": "d", "request_ids": "r3"},  # not a list: nothing to address
        "junk",
        {"job_id": "k", "reply_to": "d", "request_ids": ["r3"]},
    ], "inputs": "broken"}
    out = failed_from_raw(body, "schema: broken", worker="w", now_ms=10.0)
    assert [(r.job_id, r.request_id, r.status, r.app, r.timings.total_ms, reply) for r, reply in out] == [
        ("j", "r1", "failed", "a", 5.0, "c"), ("j", "r2", "failed", "a", 5.0, "c"),
        ("k", "r3", "failed", "default", 0.0, "d")]


def test_a_results_entry_reads_back_as_the_same_results_the_schema_gives() -> None:
    """A batch's share of one job, spliced into one ``results`` entry, reads back as the results
    each ``result`` map validates to."""
    from adaserve.broker.codec import results_entry
    from adaserve.broker.replies import read_reply

    batch = _batch()
    outcome = BatchOutcome("exit2", [
        ItemOutcome("completed", prediction=2, confidence=0.9, exit=2,
                    outputs={"logits": WireRow("float32", [3], np.ones(3, np.float32).tobytes())}, exec_ms=1.0),
        ItemOutcome("expired", reason="deadline"),
    ], started_ms=1010.0, finished_ms=1014.0, exec_ms=1.5)
    packed, _ = finished(batch, outcome, worker="w1", pool="cpu", device="cpu")
    validated = [decode(p.raw, expect=Result) for p in packed]
    assert read_reply(results_entry("j1", [p.raw for p in packed])) == validated
    assert [read_reply(p.raw)[0] for p in packed] == validated
    assert isinstance(validated[0].plan.modalities, tuple) and read_reply(packed[0].raw)[0].plan == batch.plan


def _columns_batch() -> tuple[Batch, BatchOutcome]:
    """Two jobs in one batch (one forwarded from a first part: ``prior_exec_ms``), and a third
    whose two items disagree on their submission time (no planner builds that)."""
    def item(job: str, rid: str, reply: str, sub: float, prior: float = 0.0) -> BatchItem:
        return BatchItem(job_id=job, request_id=rid, app="app", reply_to=reply, run="run1",
                         inputs={"a": Tensor.from_numpy(np.zeros(2, np.float32))}, submitted_ms=sub,
                         deadline_ms=sub + 5000.0, prior_exec_ms=prior, job_accuracy=0.5)

    items = [item("j1", "r0", "c1", 1000.0), item("j1", "r1", "c1", 1000.0), item("j2", "q0", "c2", 990.0, 2.5),
             item("j1", "r2", "c1", 1000.0), item("j3", "s0", "c1", 995.0), item("j3", "s1", "c1", 996.0)]
    plan = Plan(modalities=("a",), variant="exit2", exit=2, placement=Placement(pool="cpu"), priority=0.5)
    batch = Batch(id="b1", model="m", plan=plan, items=items, dispatched_ms=1002.0)
    logits = np.arange(18, dtype=np.float32).reshape(6, 3)
    cols = Columns(predictions=[2, 1, 0, 2, 1, 1], confidences=[0.9, 0.8, 0.7, 0.6, 0.5, 0.4],
                   exits=[None, 1, None, 2, 0, None], exec_ms=[3.0, 3.0, 3.5, 3.0, 3.0, 3.0],
                   outputs={"logits": logits}, run_ms=3.25)
    return batch, BatchOutcome("exit2", ColumnItems(cols), started_ms=1010.0, finished_ms=1014.0, exec_ms=3.25)


def test_a_columns_entry_reads_back_as_each_result_it_stands_for() -> None:
    """What a worker sends for a batch that completed whole is, read back, exactly the ``result``
    maps of ``finished``: the columnar form cannot drift from the per-request one."""
    from adaserve.broker.codec import unpack
    from adaserve.broker.replies import read_reply, read_reply_maps

    batch, outcome = _columns_batch()
    assert outcome.columns is not None and outcome.failed == []
    packed, entries, event = finished_columns(batch, outcome, outcome.columns, worker="w1", pool="cpu", device="cpu")
    old, old_event = finished(batch, outcome, worker="w1", pool="cpu", device="cpu")
    # j2's lone request goes as its own `result`; j3's two submission times: its own maps
    assert set(entries) == {("j1", "c1")}
    for key, raw in entries.items():
        want = [p for p in old if (p.job_id, p.reply_to) == key]
        assert unpack(raw)["type"] == "columns"
        assert read_reply_maps(raw) == [unpack(p.raw) for p in want]
        assert read_reply(raw) == [decode(p.raw, expect=Result) for p in want]
    assert [(p.job_id, p.request_id, p.status, p.reply_to) for p in packed] == [
        (p.job_id, p.request_id, p.status, p.reply_to) for p in old]
    assert [p.encoded() for p in packed] == [p.raw for p in old]  # a redelivery's own entries
    # the event's columns are the per-request items of the event ``finished`` writes
    new_map, old_map = unpack(event), unpack(old_event)
    assert timing_rows(new_map.pop("columns")) == old_map.pop("items") and new_map == old_map
    assert decode(event) == decode(old_event)
    lone = read_reply(packed[2].encoded())[0]
    assert (lone.request_id, lone.exit, lone.timings.queue_ms, lone.timings.exec_ms) == ("q0", 2, 17.5, 6.0)


def test_a_columns_entry_that_does_not_add_up_is_refused() -> None:
    import msgpack

    from adaserve.broker.codec import unpack
    from adaserve.broker.errors import InvalidMessage
    from adaserve.broker.replies import read_reply_maps

    batch, outcome = _columns_batch()
    assert outcome.columns is not None
    _, entries, _ = finished_columns(batch, outcome, outcome.columns, worker="w1", pool="cpu", device="cpu")
    good = unpack(entries["j1", "c1"])
    broken = [{**good, "prediction": good["prediction"][:-1]},
              {**good, "request_ids": [*good["request_ids"][:-1], 7]},
              {**good, "status": "failed"},
              {**good, "outputs": {"logits": {**good["outputs"]["logits"], "shape": [2, 3]}}},
              {**good, "timings": {**good["timings"], "total_ms": "soon"}},
              {**good, "prediction": [True] * 3},
              {**good, "v": 2}]
    for body in broken:
        with pytest.raises(InvalidMessage):
            read_reply_maps(msgpack.packb(body, use_bin_type=True))


def test_the_event_s_columns_are_every_field_of_a_request_s_timing_but_lm() -> None:
    # a field added to RequestTiming must be added to the columns (or to what they leave out)
    assert set(TIMING_COLUMNS) == set(RequestTiming.model_fields) - {"lm"}


@pytest.mark.parametrize("columns", [
    "x", {}, {k: [] for k in TIMING_COLUMNS if k != "run"}, {**{k: [1] for k in TIMING_COLUMNS}, "app": "a"},
    {**{k: [1] for k in TIMING_COLUMNS}, "app": ["a", "b"]},
])
def test_a_batch_finished_with_columns_that_are_not_is_refused(columns: object) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        BatchFinished.model_validate({"ts": 1.0, "batch_id": "b", "pool": "p", "worker": "w", "model": "m",
                                      "size": 1, "exec_ms": 1.0, "columns": columns})
