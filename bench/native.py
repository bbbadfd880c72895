"""``pipeline_vs_native``: the pipeline's maximum rate on one pool (no split) against onnxruntime
called directly on the same model, batch sizes and threads (StarONNX Fig. 3 compares itself with
native onnxruntime and Triton the same way), and where a pipeline batch's time goes.

* **native**: a closed loop of ``runner.run`` on a stacked batch; requests per second.
* **pipeline**: jobs of ``batch`` requests through producer → Redis → planner → worker → reply
  stream with ``window`` jobs outstanding (one worker, ``max_batch = batch``); requests per second.
  Rounds alternate the two on one running stack; medians are reported with every round's figure.
* **breakdown** of one batch: each stage timed by calling the layer's own code on this batch in this
  process (median of ``repeats``): ``encode`` (SDK job + planner batch message), ``redis`` (XADD and
  XRANGE of the job, batch and results messages on the bench's server), ``decode`` (planner: job;
  worker: batch; SDK: results), ``run`` (the worker's executor: inputs gathered from wire bytes and
  the model) and ``publish`` (the results and the ``batch.finished`` event encoded). ``other`` is
  the rest of a batch's time in the pipeline (one job outstanding): polling, planning, hand-offs.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import typer
from pydantic import BaseModel

from adaserve.bench.overhead import _direct, _pipeline


class Breakdown(BaseModel):
    """Milliseconds per batch."""

    encode_ms: float
    redis_ms: float
    decode_ms: float
    run_ms: float
    publish_ms: float
    stages_ms: float        # the five above
    pipeline_batch_ms: float  # p50 of one job at a time, submit to last result
    other_ms: float         # pipeline_batch_ms - stages_ms
    wire_bytes: dict[str, int]


class RatePoint(BaseModel):
    batch: int
    native_rps: float
    pipeline_rps: float
    ratio: float
    native_rps_runs: list[float]
    pipeline_rps_runs: list[float]
    breakdown: Breakdown | None
    note: str = ""  # why the pipeline side did not run


class NativeReport(BaseModel):
    model: str
    device: str
    wire_dtype: str
    threads: int
    seconds: float
    rounds: int
    window: int
    points: list[RatePoint]
    min_ratio: float
    note: str


def _median_ms(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000.0)
    return statistics.median(times)


def jobs_of(wire: list[dict[str, np.ndarray]], max_bytes: int) -> int:
    """Requests per job so that a job stays under ``max_bytes`` (a quarter of it left for the envelope)."""
    per = sum(int(v.nbytes) for v in wire[0].values()) + 256
    return max(1, min(len(wire), int(max_bytes * 0.75) // per))


def to_wire(inputs: list[dict[str, np.ndarray]], runner: Any, wire_dtype: str) -> list[dict[str, np.ndarray]]:
    """The requests as producers would send them: ``uint8`` pixels where the manifest declares how
    they are normalised (inverted here from the float samples), else the samples as they are."""
    if wire_dtype == "float32":
        return inputs
    out = []
    for x in inputs:
        row = {}
        for k, v in x.items():
            norm = getattr((runner.specs or {}).get(k), "normalize", None)
            if norm is None:
                raise ValueError(f"input {k!r} of {runner.model} declares no normalisation: it cannot travel as uint8")
            shape = (-1,) + (1,) * (v.ndim - 1)
            px = (v * np.asarray(norm.std, np.float32).reshape(shape) + np.asarray(norm.mean, np.float32).reshape(shape))
            row[k] = np.clip(np.rint(px / norm.scale), 0, 255).astype(np.uint8)
        out.append(row)
    return out


def breakdown(settings: Any, r: Any, runner: Any, model: str, wire: list[dict[str, np.ndarray]],
              pipeline_batch_ms: float, repeats: int = 10) -> Breakdown:
    """Each stage of one batch of ``wire`` requests, timed on the layers' own code (see the module doc)."""
    from adaserve.broker.clock import ServerClock
    from adaserve.broker.codec import decode, encode_map
    from adaserve.broker.messages import Batch, Job, Plan
    from adaserve.broker.settings import load_limits
    from adaserve.producers import make_job
    from adaserve.producers.jobs import encode_checked
    from adaserve.workers.execute import Executor
    from adaserve.workers.results import finished
    from adaserve.workers.runners import RunnerCache

    limits = load_limits()
    per_job = jobs_of(wire, limits.max_message_bytes)
    jobs = [make_job(model, wire[i:i + per_job], 60_000.0, run="bench-native") for i in range(0, len(wire), per_job)]
    job = jobs[0].model_copy(update={"requests": [q for j in jobs for q in j.requests]})
    big = limits.model_copy(update={"max_message_bytes": 1 << 30})  # the batch's jobs as one message
    job_raw = encode_checked(job, big)
    plan = Plan(variant=runner.variant)

    def batch_raw(j: Job) -> bytes:
        items = [{"job_id": j.id, "request_id": q.id, "app": j.app, "reply_to": j.reply_to, "run": j.run,
                  "inputs": {k: {"dtype": t.dtype, "shape": t.shape, "data": t.data} for k, t in q.inputs.items()},
                  "submitted_ms": 0.0, "deadline_ms": 60_000.0, "kind": q.kind, "generation": None,
                  "job_accuracy": None, "prior_exec_ms": 0.0} for q in j.requests]
        return encode_map({"v": 1, "type": "batch", "id": "b" * 32, "model": model,
                           "plan": plan.model_dump(mode="python"), "items": items, "dispatched_ms": 0.0})

    raw_batch = batch_raw(job)
    batch = decode(raw_batch, big, expect=Batch)
    cache = RunnerCache(lambda *a, **k: runner, device=runner.device, data_dir=settings.data_dir)
    executor = Executor(cache, ServerClock())
    outcome = executor.run(batch)
    packed, event = finished(batch, outcome, worker="bench", pool="cpu", device=runner.device)
    results = [p.raw for p in packed]
    results_raw = b"".join(results)
    key = f"{settings.namespace}:bench-native"

    def round_trip(raw: bytes) -> None:
        r.xadd(key, {"m": raw}, maxlen=1)
        r.xrange(key, count=1)

    def encode_jobs() -> None:
        for i in range(0, len(wire), per_job):
            encode_checked(make_job(model, wire[i:i + per_job], 60_000.0, run="bench-native"), limits)

    encode_ms = _median_ms(encode_jobs, repeats)
    encode_ms += _median_ms(lambda: batch_raw(job), repeats)
    decode_ms = _median_ms(lambda: decode(job_raw, big, expect=Job), repeats)
    decode_ms += _median_ms(lambda: decode(raw_batch, big, expect=Batch), repeats)
    decode_ms += _median_ms(lambda: [decode(x, limits) for x in results], repeats)
    redis_ms = sum(_median_ms(partial(round_trip, raw), repeats) for raw in (job_raw, raw_batch, results_raw))
    run_ms = _median_ms(lambda: executor.run(batch), repeats)
    publish_ms = _median_ms(lambda: finished(batch, outcome, worker="bench", pool="cpu", device=runner.device), repeats)
    r.delete(key)
    stages = encode_ms + redis_ms + decode_ms + run_ms + publish_ms
    return Breakdown(encode_ms=round(encode_ms, 3), redis_ms=round(redis_ms, 3), decode_ms=round(decode_ms, 3),
                     run_ms=round(run_ms, 3), publish_ms=round(publish_ms, 3), stages_ms=round(stages, 3),
                     pipeline_batch_ms=round(pipeline_batch_ms, 3), other_ms=round(pipeline_batch_ms - stages, 3),
                     wire_bytes={"job": len(job_raw), "batch": len(raw_batch), "results": len(results_raw),
                                 "event": len(event)})


def _maker(model: str, jobs: list[list[dict[str, np.ndarray]]]) -> Callable[[], Any]:
    """A job factory that cycles through ``jobs`` (the requests of one batch, split to fit the limit)."""
    from adaserve.producers import make_job

    turn = iter(range(1 << 62))
    return lambda: make_job(model, jobs[next(turn) % len(jobs)], 60_000.0, run="bench-native")


def pipeline_vs_native(model: str = "effnet-lite0", batch_sizes: tuple[int, ...] = (1, 8, 32), *,
                       device: str = "cpu", wire_dtype: str = "float32", seconds: float = 3.0, rounds: int = 3,
                       threads: int = 1, window: int = 2, latency_jobs: int = 10,
                       progress: Callable[[str], None] | None = None) -> NativeReport:
    """Native and pipeline maximum rates per batch size, side by side on one stack (see the module doc).

    ``device="gpu"`` runs both sides on the GPU (a GPU worker and a CUDA runner); the CPU figures
    of a CPU host are labelled as such in ``note``.
    """
    from adaserve.bench.server import bench_settings
    from adaserve.broker import connect
    from adaserve.broker.settings import load_limits
    from adaserve.models.datasets import sample_inputs
    from adaserve.producers import Client
    from adaserve.stack import Stack
    from adaserve.workers.runtime import load_runner

    tick = progress or (lambda _: None)
    points: list[RatePoint] = []
    with bench_settings() as settings:
        runner = load_runner(model, "default", device, settings.data_dir, threads=threads)
        for b in batch_sizes:
            inputs, _ = sample_inputs(model, b, seed=0)
            wire = to_wire(inputs, runner, wire_dtype)
            stacked = {k: np.stack([x[k] for x in inputs]) for k in inputs[0]}
            batch_bytes = sum(int(v.nbytes) for x in wire for v in x.values())
            if batch_bytes > load_limits().max_message_bytes:
                # Workers refuse a batch message above the limit, and the planner does not cap a
                # batch's bytes: this batch size cannot go through the pipeline at this wire dtype.
                native = [_direct(runner, stacked, seconds)[0] for _ in range(rounds)]
                points.append(RatePoint(batch=b, native_rps=round(statistics.median(native), 2), pipeline_rps=0.0,
                                        ratio=0.0, native_rps_runs=[round(x, 2) for x in native],
                                        pipeline_rps_runs=[], breakdown=None,
                                        note=f"a batch of {b} is {batch_bytes:,} bytes of {wire_dtype} inputs, above "
                                             f"the {load_limits().max_message_bytes:,}-byte message limit a worker "
                                             "enforces; not run through the pipeline"))
                continue
            stack = Stack(settings, cpu_workers=0 if device == "gpu" else 1, gpu_worker=device == "gpu",
                          worker_threads=threads, max_batch=b)
            with stack:
                stack.wait_ready()
                client = Client(stack.settings)
                r = connect(stack.settings)

                # A job above the message limit is refused: large batches arrive as several jobs,
                # which the planner batches together (max_batch = b), as separate producers' would.
                per_job = jobs_of(wire, client.limits.max_message_bytes)
                jobs = [wire[i:i + per_job] for i in range(0, b, per_job)]
                make = _maker(model, jobs)

                outstanding = window * len(jobs)
                _pipeline(client, make, 1.0, outstanding)  # warm-up: loads, JIT paths, caches
                _direct(runner, stacked, 0.5)
                native, piped = [], []
                for i in range(rounds):
                    tick(f"batch {b}: round {i + 1}/{rounds}")
                    native.append(_direct(runner, stacked, seconds)[0])
                    done, took = _pipeline(client, make, seconds, outstanding)
                    piped.append(done / took)
                one = []
                for _ in range(latency_jobs):
                    t = time.perf_counter()
                    handles = client.submit_many([make() for _ in jobs])
                    for h in handles:
                        h.result(60)
                    one.append((time.perf_counter() - t) * 1000.0)
                tick(f"batch {b}: breakdown")
                parts = breakdown(stack.settings, r, runner, model, wire, statistics.median(one))
                client.close()
                r.close()
            a, p = statistics.median(native), statistics.median(piped)
            points.append(RatePoint(batch=b, native_rps=round(a, 2), pipeline_rps=round(p, 2),
                                    ratio=round(p / a, 3) if a else 0.0,
                                    native_rps_runs=[round(x, 2) for x in native],
                                    pipeline_rps_runs=[round(x, 2) for x in piped], breakdown=parts))
    note = ("CPU host: native onnxruntime and the pipeline both on the CPU, sharing its cores with the "
            "planner, the server and the producer; not GPU figures") if device == "cpu" else "one GPU, no split"
    return NativeReport(model=model, device=device, wire_dtype=wire_dtype, threads=threads, seconds=seconds,
                        rounds=rounds, window=window, points=points,
                        min_ratio=min((pt.ratio for pt in points if pt.breakdown is not None), default=0.0), note=note)


def native(
    model: str = typer.Option("effnet-lite0", help="Model (its default variant, one pool, no split)."),
    batch: str = typer.Option("1,8,32", help="Batch sizes, comma-separated; each job carries this many requests."),
    device: str = typer.Option("cpu", help="cpu, or gpu for a GPU worker and a CUDA runner."),
    wire: str = typer.Option("float32", help="float32, or uint8 pixels where the manifest declares the normalisation."),
    seconds: float = typer.Option(3.0, min=0.5, help="Seconds per measurement."),
    rounds: int = typer.Option(3, min=1, help="Alternating rounds; medians are reported."),
    threads: int = typer.Option(1, min=1, help="onnxruntime intra-op threads on both sides."),
    window: int = typer.Option(2, min=1, help="Jobs kept outstanding in the pipeline."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """The pipeline's maximum rate against native onnxruntime, and where a batch's time goes."""
    import json

    from rich.progress import Progress

    if device not in ("cpu", "gpu"):
        raise typer.BadParameter("cpu or gpu", param_hint="--device")
    if wire not in ("float32", "uint8"):
        raise typer.BadParameter("float32 or uint8", param_hint="--wire")
    try:
        sizes = tuple(int(x) for x in batch.split(",") if x.strip())
    except ValueError:
        raise typer.BadParameter("comma-separated integers, e.g. 1,8,32", param_hint="--batch") from None
    if not sizes or any(not 1 <= s <= 256 for s in sizes):
        raise typer.BadParameter("batch sizes must lie in 1..256", param_hint="--batch")
    with Progress(transient=True, disable=as_json) as bar:
        task = bar.add_task("native vs pipeline", total=None)
        try:
            rep = pipeline_vs_native(model, sizes, device=device, wire_dtype=wire, seconds=seconds, rounds=rounds,
                                     threads=threads, window=window,
                                     progress=lambda s: bar.update(task, description=s))
        except ValueError as exc:  # uint8 asked of a model that declares no normalisation
            raise typer.BadParameter(str(exc), param_hint="--wire") from None
    if as_json:
        print(json.dumps(rep.model_dump()))
        return
    print(f"{rep.model} on {rep.device}, {rep.wire_dtype} on the wire ({rep.note})")
    for p in rep.points:
        b = p.breakdown
        if b is None:
            print(f"batch {p.batch:>3}: native {p.native_rps:.1f} req/s; {p.note}")
            continue
        print(f"batch {p.batch:>3}: native {p.native_rps:.1f} req/s, pipeline {p.pipeline_rps:.1f} req/s, "
              f"ratio {p.ratio:.3f}; per batch {b.pipeline_batch_ms:.1f} ms = encode {b.encode_ms:.2f} + redis "
              f"{b.redis_ms:.2f} + decode {b.decode_ms:.2f} + run {b.run_ms:.2f} + publish {b.publish_ms:.2f} "
              f"+ other {b.other_ms:.2f}")


def register(bench_app: typer.Typer) -> None:
    bench_app.command("native")(native)
