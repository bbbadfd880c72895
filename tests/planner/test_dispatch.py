"""The batch map the planner builds by hand is exactly the wire's ``Batch``, for every kind of
request: it validates (the wire models forbid unknown keys), and it holds what the job said (the
internal form cannot drift from the documented one)."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

from adaserve.broker import Tensor
from adaserve.broker.batchform import COLUMN_KEYS, JOB_KEYS
from adaserve.broker.codec import decode, encode_map
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


def _pending(reqs: list[Request], job_id: str = "j") -> list[Pending]:
    job = Job(id=job_id, model="m", requests=reqs, slo=Slo(deadline_ms=250.0), reply_to="c")
    held = HeldJob(job, "1-0", 1000.0, len(reqs))
    return [Pending(job_id, r.id, "default", "m", 1.0, 1.25, payload=(held, r)) for r in reqs]


def _req(i: int, x: np.ndarray, **kw: object) -> Request:
    return Request(id=f"r{i}", inputs={"x": Tensor.from_numpy(x)}, **kw)  # type: ignore[arg-type]


def test_alike_forward_requests_go_columnar_with_the_documented_keys_and_their_bytes_joined() -> None:
    a = _pending([_req(i, np.full(3, i, np.float32)) for i in range(3)], "ja")
    b = _pending([_req(i + 3, np.full(3, i + 3, np.float32)) for i in range(2)], "jb")
    items = [a[0], b[0], a[1], b[1], a[2]]
    body = msgpack.unpackb(build_batch("m", items, 1003.0, Plan())[1], raw=False)
    assert set(body) == COLUMN_KEYS and all(set(j) == JOB_KEYS for j in body["jobs"])
    assert [j["request_ids"] for j in body["jobs"]] == [["r0", "r1", "r2"], ["r3", "r4"]]
    x = body["inputs"]["x"]
    assert x["shape"] == [5, 3] and x["data"] == np.repeat(np.arange(5, dtype=np.float32), 3).tobytes()
    assert [it.request_id for it in decode(encode_map(body), expect=Batch).items] == ["r0", "r1", "r2", "r3", "r4"]


@pytest.mark.parametrize("odd", [
    _req(9, np.zeros(4, np.float32)),  # another shape
    _req(9, np.zeros(3, np.float64)),  # another dtype
    Request(id="r9", inputs={"y": Tensor.from_numpy(np.zeros(3, np.float32))}),  # another input
    Request(id="r9", inputs={"x": Tensor.from_numpy(np.zeros(3, np.float32)),
                             "y": Tensor.from_numpy(np.zeros(3, np.float32))}),  # one more input
    _req(9, np.zeros(3, np.float32), kind="generate"),
])
def test_a_batch_with_an_unlike_request_keeps_the_per_request_form(odd: Request) -> None:
    items = _pending([_req(0, np.zeros(3, np.float32)), odd])
    body = msgpack.unpackb(build_batch("m", items, 1003.0, Plan())[1], raw=False)
    assert "jobs" not in body and [it["request_id"] for it in body["items"]] == ["r0", "r9"]
    assert decode(encode_map(body), expect=Batch).items[1].inputs.keys() == odd.inputs.keys()


def test_requests_of_two_inputs_go_columnar_and_one_unlike_input_keeps_them_per_request() -> None:
    def two(i: int, y: np.ndarray) -> Request:
        return Request(id=f"r{i}", inputs={"x": Tensor.from_numpy(np.full(2, i, np.float32)), "y": Tensor.from_numpy(y)})

    alike = _pending([two(i, np.full(3, i, np.int64)) for i in range(3)])
    body = msgpack.unpackb(build_batch("m", alike, 1003.0, Plan())[1], raw=False)
    assert body["inputs"]["x"]["shape"] == [3, 2] and body["inputs"]["y"]["shape"] == [3, 3]
    assert body["inputs"]["y"]["data"] == np.repeat(np.arange(3, dtype=np.int64), 3).tobytes()
    unlike = _pending([two(0, np.zeros(3, np.int64)), two(1, np.zeros(3, np.int32))])
    body = msgpack.unpackb(build_batch("m", unlike, 1003.0, Plan())[1], raw=False)
    assert "jobs" not in body and [it["request_id"] for it in body["items"]] == ["r0", "r1"]


def test_large_rows_read_as_views_travel_as_the_same_bytes_and_a_whole_job_is_not_copied() -> None:
    from adaserve.broker.codec import validate
    from adaserve.broker.settings import Limits
    from adaserve.broker.tensors import wire_of
    from adaserve.planner import dispatch

    photos = np.random.default_rng(0).random((4, 3, 80, 80), dtype=np.float32)  # 75 kB a row
    body = {"v": 1, "type": "job", "id": "j", "model": "m", "slo": {"deadline_ms": 250.0}, "reply_to": "c",
            "request_ids": [f"r{i}" for i in range(4)], "inputs": {"x": wire_of(photos)}}
    viewed, copied = (validate(body, Limits(), expect=Job, views=v) for v in (True, False))
    column = body["inputs"]["x"]["data"]
    for rows in ([0, 1, 2, 3], [1, 2], [0, 2, 3], [3, 2], [2]):
        raw_v = build_batch("m", [_pending(viewed.requests)[i] for i in rows], 1003.0, Plan())[1]
        raw_c = build_batch("m", [_pending(copied.requests)[i] for i in rows], 1003.0, Plan())[1]
        map_v, map_c = msgpack.unpackb(raw_v), msgpack.unpackb(raw_c)
        assert map_v.pop("id") != map_c.pop("id") and map_v == map_c  # the same map but for the batch's id
        got = decode(raw_v, expect=Batch)
        np.testing.assert_array_equal(np.stack([it.inputs["x"].to_numpy() for it in got.items]), photos[rows])
    whole = dispatch._joined([r.inputs["x"].data for r in viewed.requests])
    assert type(whole) is memoryview and whole.obj is column and whole == column
    gap = dispatch._joined([viewed.requests[i].inputs["x"].data for i in (0, 2)])
    assert type(gap) is bytes and gap == column[:photos[0].nbytes] + column[2 * photos[0].nbytes:3 * photos[0].nbytes]
    small = validate({**body, "inputs": {"x": wire_of(photos[:, :, :4])}}, Limits(), expect=Job, views=True)
    assert type(dispatch._joined([r.inputs["x"].data for r in small.requests])) is bytes  # small rows: joined
