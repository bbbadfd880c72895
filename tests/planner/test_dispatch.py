"""The batch map the planner builds by hand is exactly the wire's ``Batch``, for every kind of
request: it validates (the wire models forbid unknown keys), and it holds what the job said (the
internal form cannot drift from the documented one)."""

from __future__ import annotations

import numpy as np

from adaserve.broker import Tensor
from adaserve.broker.codec import decode
from adaserve.broker.messages import Batch, Generation, Job, Placement, Plan, Request, Slo
from adaserve.planner.core import Pending
from adaserve.planner.dispatch import build_batch, build_batches
from adaserve.planner.state import HeldJob


def test_a_built_batch_is_a_valid_batch_with_the_jobs_contents() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    reqs = [Request(id="r0", inputs={"audio": Tensor.from_numpy(x), "image": Tensor.from_numpy(x[:1])}),
            Request(id="r1", kind="generate", inputs={"tokens": Tensor.from_numpy(np.array([1, 2], np.int64))},
                    generation=Generation(max_new_tokens=4, temperature=0.5, seed=7))]
    job = Job(id="j", app="shop", model="m", requests=reqs, slo=Slo(deadline_ms=250.0), reply_to="c", run="run1")
    held = HeldJob(job, "1-0", 1000.0, 2, accuracy=0.93)
    items = [Pending("j", r.id, "shop", "m", 1.0, 1.25, payload=(held, r)) for r in reqs]
    plan = Plan(modalities=("audio",), variant="audio", placement=Placement(pool="gpu", part=1, next_pool="cpu"))
    bid, raw = build_batch("m", items, 1003.0, plan)
    batch = decode(raw, expect=Batch)
    assert (batch.id, batch.model, batch.plan, batch.dispatched_ms) == (bid, "m", plan, 1003.0)
    a, b = batch.items
    assert (a.job_id, a.request_id, a.app, a.reply_to, a.run, a.kind) == ("j", "r0", "shop", "c", "run1", "forward")
    assert (a.submitted_ms, a.deadline_ms, a.job_accuracy, a.prior_exec_ms) == (1000.0, 1250.0, 0.93, 0.0)
    np.testing.assert_array_equal(a.inputs["audio"].to_numpy(), x)
    assert a.inputs["image"].shape == (1, 3) and a.generation is None
    assert b.kind == "generate" and b.generation == reqs[1].generation


def test_a_batch_past_the_message_limit_is_cut_into_batches_that_fit_and_keep_every_request() -> None:
    photo = np.zeros((3, 64, 64), np.float32)  # 48 KiB each
    reqs = [Request(id=f"r{i}", inputs={"x": Tensor.from_numpy(photo + i)}) for i in range(10)]
    job = Job(id="j", model="m", requests=reqs, slo=Slo(deadline_ms=250.0), reply_to="c")
    held = HeldJob(job, "1-0", 1000.0, 10)
    items = [Pending("j", r.id, "default", "m", 1.0, 1.25, payload=(held, r)) for r in reqs]
    limit = 3 * photo.nbytes + 4096
    out = build_batches("m", items, 1003.0, Plan(), limit)
    assert len(out) > 1 and all(len(raw) <= limit for _, raw, _ in out)
    assert len({bid for bid, _, _ in out}) == len(out)
    got = [it for _, raw, _ in out for it in decode(raw, expect=Batch).items]
    assert [it.request_id for it in got] == [f"r{i}" for i in range(10)]
    assert [float(it.inputs["x"].to_numpy()[0, 0, 0]) for it in got] == [float(i) for i in range(10)]
    assert build_batches("m", items, 1003.0, Plan(), 1 << 23)[0][2] == items  # fits: one batch, untouched
