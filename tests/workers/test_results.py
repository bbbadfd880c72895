"""The maps the worker encodes by hand are exactly the wire models: they validate and round-trip."""

from __future__ import annotations

import numpy as np

from adaserve.broker import Tensor
from adaserve.broker.codec import decode
from adaserve.broker.events import BatchFinished
from adaserve.broker.messages import Batch, BatchItem, Placement, Plan, Result
from adaserve.workers.execute import BatchOutcome, ItemOutcome, WireRow
from adaserve.workers.results import failed_from_raw, finished


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
