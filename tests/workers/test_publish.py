"""Which finished batches keep their stream entry: the rule alone, then a worker against the real server."""

from __future__ import annotations

from adaserve.broker.events import BatchFinished
from adaserve.workers.publish import Keep


def test_one_batch_per_interval_keeps_its_entry() -> None:
    now = [100.0]
    keep = Keep(every_s=0.05, clock=lambda: now[0])
    got = []
    for t in (100.0, 100.01, 100.049, 100.05, 100.2, 100.2001):
        now[0] = t
        got.append(keep.take())
    assert got == [True, False, False, True, True, False]


def test_a_worker_deletes_the_batches_it_does_not_keep_and_says_which(feeder, serve) -> None:
    sent = {}
    with serve():
        for _ in range(8):
            batch, _ = feeder.batch(2)
            sent[batch.id] = feeder.send(batch)
        assert feeder.wait_for(lambda: len(feeder.events("batch.finished")) == 8)
        assert len(feeder.results(16)) == 16
    events = [e for e in feeder.events("batch.finished") if isinstance(e, BatchFinished)]
    left = {eid.decode() for eid, _ in feeder.r.xrange(feeder.keys.batches(feeder.pool))}
    kept = {e.batch_id for e in events if e.kept}
    assert {sent[b] for b in kept} == left  # kept: still there; the rest: deleted at their ack
    assert events[0].kept  # a worker's first batch is always kept
    span_s = (events[-1].ts - events[0].ts) / 1000.0
    assert len(kept) <= 2 + span_s / 0.05
    assert feeder.pending() == 0
