"""``adaserve bench hotpaths``: the serving path's per-request Python, each piece alone, in this process.

The pipeline's own CPU (``bench overhead``) is the sum of pieces that a shared machine makes hard
to see one by one. This times each on the same real job (``--model``, ``--batch`` requests, the
held-out inputs), in CPU time, repeats interleaved so that the machine's load reaches every piece
alike; the figures are medians (and min-max) over repeats, in µs per request:

* ``job_submit``: the SDK building the job from the arrays and checking it into the bytes it
  XADDs (``make_job``, ``encode_checked``);
* ``job_decode``: the planner's admission of the job's bytes (unpack and validate: it stays);
* ``job_submit_columns``, ``job_decode_columns``: the same two for the job in columns (one
  stacked tensor per input, docs/wire.md);
* ``batch_build``, ``batch_build_columns``: the planner building the batch of the job's requests,
  in the per-request form (``items``) and in the columnar one (what it sends for alike requests);
* ``batch_unpack``, ``batch_decode``, ``batch_read``: a worker reading the planner's per-request
  batch map — msgpack alone, into the pydantic ``Batch``, and into ``workers.wire``'s light types;
  ``batch_read_columns``: the same batch in the columnar form, read as workers do;
* ``inputs_gather``, ``inputs_gather_columns``: the executor's signature check and stacking of the
  batch's inputs into the runner's arrays, from per-request tensors and from the stacked ones;
* ``results_collect``, ``results_validate``: the SDK filing a job's ``results`` entry and counting
  its completions (``JobResult`` built from the maps), then also building its ``Result`` objects;
* ``worker_rows``, ``worker_columns``: a worker turning the runner's answers for the batch (ten
  probabilities per request) into what it sends — a ``ItemOutcome`` per request and one ``result``
  map each (``finished``, the form for a batch with failures), or the job's one ``columns`` entry
  (``finished_columns``, what a batch that completed whole sends) — the batch event included;
* ``columns_collect``: the SDK filing a ``columns`` entry and counting its completions (a job
  whose requests are all in the entry is filed whole, without a map per request).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import typer


def _pieces(model: str, batch: int) -> dict[str, Callable[[], object]]:
    import numpy as np

    from adaserve.broker.codec import decode, encode, encode_map, results_entry, unpack
    from adaserve.broker.messages import Batch, Job, Plan, Result, Timings
    from adaserve.broker.replies import ColumnsEntry, read_reply_entry
    from adaserve.broker.settings import default_limits
    from adaserve.broker.tensors import Tensor
    from adaserve.models.datasets import sample_inputs
    from adaserve.planner.core import Pending
    from adaserve.planner.dispatch import build_batch
    from adaserve.planner.state import HeldJob
    from adaserve.producers import encode_checked, make_job
    from adaserve.producers.tracking import Tracked
    from adaserve.workers.execute import BatchOutcome, ColumnItems, Columns
    from adaserve.workers.inputs import gather, gather_stacked, signature, targets
    from adaserve.workers.results import finished, finished_columns
    from adaserve.workers.wire import WireBatch, read_batch

    inputs, _ = sample_inputs(model, batch, seed=0)
    job = make_job(model, list(inputs), 60_000.0, reply_to="c1")
    job_raw = encode(job)
    items = [{"job_id": job.id, "request_id": r.id, "app": job.app, "reply_to": job.reply_to, "run": job.run,
              "inputs": {k: t.wire() for k, t in r.inputs.items()}, "submitted_ms": 1.0, "deadline_ms": 2.0,
              "kind": r.kind, "generation": None, "job_accuracy": None, "prior_exec_ms": 0.0} for r in job.requests]
    batch_raw = encode_map({"v": 1, "type": "batch", "id": "b", "model": model, "plan": Plan().model_dump(),
                            "items": items, "dispatched_ms": 1.0})
    probs = Tensor.from_numpy(np.linspace(0, 1, 10, dtype=np.float32))  # a classifier's answer
    results = [Result(job_id=job.id, request_id=r.id, model=model, status="completed", prediction=1, confidence=0.9,
                      plan=Plan(), worker="w", outputs={"probabilities": probs},
                      timings=Timings(submitted_ms=1.0, dispatched_ms=2.0, started_ms=3.0, finished_ms=4.0,
                                      queue_ms=1.0, exec_ms=1.0, total_ms=3.0)) for r in job.requests]
    reply_raw = results_entry(job.id, [encode(x) for x in results])
    ids = tuple(r.id for r in job.requests)
    wire = read_batch(batch_raw)
    held = HeldJob(job, "1-0", 1.0, len(job.requests))
    pending = [Pending(job.id, r.id, job.app, model, 0.0, 1.0, payload=(held, r)) for r in job.requests]
    columns_batch = build_batch(model, pending, 1.0, Plan())[1]
    wire_columns = read_batch(columns_batch)
    names = tuple(job.requests[0].inputs)

    def stack(b: WireBatch) -> object:
        sig = signature(b.items[0].inputs, names)  # type: ignore[arg-type]
        if b.stacked is not None:
            return gather_stacked(b.stacked, len(b.items), sig, targets(sig, None))  # type: ignore[arg-type]
        sigs = {signature(it.inputs, names) for it in b.items}  # type: ignore[arg-type]
        assert sigs == {sig}
        return gather([it.inputs for it in b.items], sig, targets(sig, None))  # type: ignore[misc]
    n = len(ids)
    answers = np.random.default_rng(0).random((n, 10), dtype=np.float32)  # the runner's output for the batch

    def columns() -> Columns:
        return Columns(answers.argmax(1).tolist(), answers.max(1).tolist(), [None] * n, [1.0] * n,
                       {"probabilities": answers}, 1.0)

    def outcome() -> BatchOutcome:
        return BatchOutcome("default", ColumnItems(columns()), 3.0, 4.0, 1.0)

    def rows() -> object:
        done = outcome()
        return finished(wire, BatchOutcome("default", list(done.items), 3.0, 4.0, 1.0), worker="w", pool="cpu",
                        device="cpu")

    def cols() -> object:
        done = outcome()
        assert done.columns is not None
        return finished_columns(wire, done, done.columns, worker="w", pool="cpu", device="cpu")

    (columns_raw,) = finished_columns(wire, outcome(), columns(), worker="w", pool="cpu", device="cpu")[1].values()

    def collect(build: bool, raw: bytes = reply_raw) -> Callable[[], object]:
        def run() -> object:
            t = Tracked(job.id, job.app, model, "", 60_000.0, ids)
            got = read_reply_entry(raw)  # as the client files it: a whole job's columns at once
            if not (isinstance(got, ColumnsEntry) and t.add_columns(got)):
                for m in (got.maps() if isinstance(got, ColumnsEntry) else got):
                    t.add(m)
            assert t.result is not None and t.result.completed == len(ids)
            return t.result.results if build else t.result
        return run

    lim = default_limits()

    def submit() -> bytes:
        return encode_checked(make_job(model, list(inputs), 60_000.0), lim, reply_to="c1")

    stacked = {k: np.stack([x[k] for x in inputs]) for k in inputs[0]}
    columns_job_raw = encode_checked(make_job(model, stacked, 60_000.0), lim, reply_to="c1")

    def submit_columns() -> bytes:
        return encode_checked(make_job(model, stacked, 60_000.0), lim, reply_to="c1")

    return {
        "job_submit": submit,
        "job_decode": lambda: decode(job_raw, expect=Job),
        "job_submit_columns": submit_columns,
        "job_decode_columns": lambda: decode(columns_job_raw, expect=Job),
        "batch_build": lambda: build_batch(model, pending, 1.0, Plan(), columnar=False),
        "batch_build_columns": lambda: build_batch(model, pending, 1.0, Plan()),
        "batch_unpack": lambda: unpack(batch_raw),
        "batch_decode": lambda: decode(batch_raw, expect=Batch),
        "batch_read": lambda: read_batch(batch_raw),
        "batch_read_columns": lambda: read_batch(columns_batch),
        "inputs_gather": lambda: stack(wire),
        "inputs_gather_columns": lambda: stack(wire_columns),
        "results_collect": collect(False),
        "results_validate": collect(True),
        "worker_rows": rows,
        "worker_columns": cols,
        "columns_collect": collect(False, columns_raw),
    }


def hotpaths(
    model: str = typer.Option("fsdd-cnn", help="Model whose held-out inputs make the job."),
    batch: int = typer.Option(32, min=1, max=1024, help="Requests per job (and per batch)."),
    repeats: int = typer.Option(30, min=3, help="Interleaved repeats; medians are reported."),
    calls: int = typer.Option(50, min=1, help="Calls of each piece per repeat (one CPU-time reading around them)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """CPU µs per request of each hot piece of the serving path, alone, on a real job."""
    pieces = _pieces(model, batch)
    runs: dict[str, list[float]] = {k: [] for k in pieces}
    for _ in range(repeats):
        for name, fn in pieces.items():
            t = time.process_time()
            for _ in range(calls):
                fn()
            runs[name].append((time.process_time() - t) / calls / batch * 1e6)
    out: dict[str, Any] = {"model": model, "batch": batch, "repeats": repeats, "us_per_request": {
        k: {"median": round(statistics.median(v), 2), "min": round(min(v), 2), "max": round(max(v), 2)}
        for k, v in runs.items()}}
    if as_json:
        print(json.dumps(out))
        return
    print(f"{model}, {batch} requests: CPU µs per request, median (min-max) of {repeats} repeats")
    for k, v in out["us_per_request"].items():
        print(f"  {k:18s} {v['median']:7.2f} ({v['min']:.2f}-{v['max']:.2f})")


def register(bench_app: typer.Typer) -> None:
    bench_app.command("hotpaths")(hotpaths)
