"""``adaserve bench overhead``: the pipeline against a direct onnxruntime loop, side by side.

Both serve the same model at the same batch size with the same intra-op threads: (a) a loop that
calls the runner on a stacked batch, (b) jobs of ``batch`` requests through producer → Redis →
planner → worker → reply stream, kept saturated by a closed loop with several jobs outstanding.
Rounds alternate (a) and (b) on one running pipeline; medians over rounds are reported.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import typer

from adaserve.bench.cpu import CpuMeter


def _direct(runner: Any, batch: dict[str, np.ndarray], seconds: float) -> tuple[float, list[float], float]:
    """Requests per second, batch latencies (ms), and CPU seconds per request of the loop."""
    lat: list[float] = []
    n = 0
    cpu0 = time.process_time()
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t = time.perf_counter()
        runner.run(batch)
        lat.append((time.perf_counter() - t) * 1000)
        n += 1
    size = len(next(iter(batch.values())))
    return n * size / seconds, lat, (time.process_time() - cpu0) / max(n * size, 1)


def _pipeline(client: Any, make: Any, seconds: float, window: int, meter: CpuMeter | None = None) -> tuple[int, float]:
    """Requests completed and seconds taken, keeping ``window`` jobs outstanding."""
    client.submit_many([make() for _ in range(window)])
    done = 0
    if meter is not None:
        meter.start()
    t0 = time.perf_counter()
    end = t0 + seconds
    while time.perf_counter() < end:
        finished = client.poll(0.05)
        done += sum(r.completed for r in finished)
        if finished:
            client.submit_many([make() for _ in finished])
    took = time.perf_counter() - t0
    if meter is not None:
        meter.stop()
    client.drain(30)  # let the outstanding jobs finish before the next round
    return done, took


def _meter(stack: Any, r: Any) -> CpuMeter:
    """Planner, worker, this process (the producer SDK) and, when it runs here, the server."""
    pids = {name.split("-")[0]: proc.pid for name, proc in stack.children if name in ("planner", "worker-cpu-0")}
    pids["producer"] = os.getpid()
    server = int(r.info("server").get("process_id", 0))
    if server and Path(f"/proc/{server}/stat").exists():
        pids["redis"] = server
    return CpuMeter(pids, r)


def _latency(client: Any, make: Any, n: int) -> tuple[list[float], list[tuple[float, ...]]]:
    """``n`` jobs one after another: each one's ms from submission to its last result, and the
    wall-clock moments (ms) of its way, for ``hops``: sent, dispatched, started, finished, replied."""
    out: list[float] = []
    ways: list[tuple[float, ...]] = []
    for _ in range(n):
        t, wall = time.perf_counter(), time.time() * 1000
        res = client.submit(make()).result(30)  # building the job counts, as it always has here
        took, replied = (time.perf_counter() - t) * 1000, time.time() * 1000
        if res.completed:
            out.append(took)
            tm = res.results[0].timings  # after the clock stopped: building results costs
            if tm.dispatched_ms is not None and tm.started_ms is not None:
                ways.append((wall, tm.dispatched_ms, tm.started_ms, tm.finished_ms, replied))
    return out, ways


HOPS = ("to_planner", "to_worker", "in_worker", "to_client")


def hops(ways: list[tuple[float, ...]]) -> dict[str, float]:
    """The median ms of each part of one job's way at low load: from the client's submit to the
    planner's dispatch (building the job, the XADD, the planner's read, admission and step), to the worker's start
    (the batch's transfer, its read and decode), inside the worker (inputs gathered, the model, the
    outputs), and back to the client (the finaliser, the reply's read). The clocks are the
    server's (planner, worker) and this process's: one machine's, as the bench's own server is."""
    if not ways:
        return {}
    a = np.asarray(ways, dtype=float)
    return {name: round(float(np.median(a[:, i + 1] - a[:, i])), 3) for i, name in enumerate(HOPS)}


def overhead(
    model: str = typer.Option("fsdd-cnn", help="Model (its default variant)."),
    batch: int = typer.Option(32, min=1, max=256, help="Batch size of both sides; each job carries this many requests."),
    seconds: float = typer.Option(5.0, min=0.5, help="Seconds per measurement."),
    rounds: int = typer.Option(3, min=1, help="Alternating rounds; medians are reported."),
    threads: int = typer.Option(1, min=1, help="onnxruntime intra-op threads on both sides."),
    window: int = typer.Option(4, min=1, help="Jobs kept outstanding in the pipeline."),
    form: str = typer.Option("columns", help="How jobs are sent: 'columns' (one stacked tensor per input) or "
                                             "'requests' (one map per request; docs/wire.md)."),
    input_dtype: str = typer.Option("", help="Send the pipeline's inputs in this float dtype (float16, float64) "
                                              "instead of the model's: the same requests in fewer or more bytes, "
                                              "to measure what moving them costs (the direct loop keeps the model's)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Throughput ratio and added latency of the whole pipeline over direct onnxruntime."""
    if form not in ("columns", "requests"):
        raise typer.BadParameter("--form is 'columns' or 'requests'")
    from rich.progress import Progress

    from adaserve.bench.server import bench_settings
    from adaserve.broker import connect
    from adaserve.models.datasets import sample_inputs
    from adaserve.producers import Client, make_job
    from adaserve.stack import Stack
    from adaserve.workers.runtime import load_runner

    inputs, _ = sample_inputs(model, batch, seed=0)
    stacked = {k: np.stack([x[k] for x in inputs]) for k in inputs[0]}
    sent = stacked
    if input_dtype:
        if input_dtype not in ("float16", "float32", "float64"):
            raise typer.BadParameter("--input-dtype is float16, float32 or float64")
        sent = {k: v.astype(input_dtype) if v.dtype.kind == "f" else v for k, v in stacked.items()}
        inputs = [{k: v[j] for k, v in sent.items()} for j in range(batch)]
    with bench_settings() as settings:
        runner = load_runner(model, "default", "cpu", settings.data_dir, threads=threads)
        stack = Stack(settings, cpu_workers=1, gpu_worker=False, worker_threads=threads, max_batch=batch)
        with stack, Progress(transient=True, disable=as_json) as bar:
            stack.wait_ready()
            client = Client(stack.settings)

            def make() -> Any:
                if form == "columns":
                    return make_job(model, sent, 60_000.0, run="bench-overhead")
                return make_job(model, list(inputs), 60_000.0, run="bench-overhead")

            _pipeline(client, make, 1.0, window)  # warm-up
            _direct(runner, stacked, 0.5)
            task = bar.add_task("rounds", total=rounds)
            direct_rps, piped_rps, direct_lat, model_cpu = [], [], [], []
            r = connect(stack.settings)
            meter = _meter(stack, r)
            completed = 0
            load0 = os.getloadavg()[0]
            for _ in range(rounds):
                rps, lat, cpu = _direct(runner, stacked, seconds)
                direct_rps.append(rps)
                direct_lat += lat
                model_cpu.append(cpu)
                done, took = _pipeline(client, make, seconds, window, meter)
                completed += done
                piped_rps.append(done / took)
                bar.advance(task)
            load1 = os.getloadavg()[0]
            memory = meter.memory()
            piped_lat, ways = _latency(client, make, 50)
            client.close()
            r.close()
    a, b = statistics.median(direct_rps), statistics.median(piped_rps)
    out = {
        "model": model, "batch": batch, "threads": threads, "rounds": rounds, "seconds": seconds, "form": form,
        "input_bytes_per_job": sum(v.nbytes for v in sent.values()),
        "direct_rps": a, "pipeline_rps": b, "throughput_ratio": b / a if a else 0.0,
        "direct_rps_runs": [round(x, 1) for x in direct_rps], "pipeline_rps_runs": [round(x, 1) for x in piped_rps],
        "direct_batch_p50_ms": float(np.percentile(direct_lat, 50)),
        "pipeline_batch_p50_ms": float(np.percentile(piped_lat, 50)) if piped_lat else None,
        "added_p50_ms": float(np.percentile(piped_lat, 50) - np.percentile(direct_lat, 50)) if piped_lat else None,
        # where one job's time goes when it is alone in the pipeline (``hops``)
        "latency_hops_p50_ms": hops(ways),
        **_costs(meter, completed, statistics.median(model_cpu)),
        # after the rounds; the jobs' 60 s deadlines outlive the run, so a process that keeps
        # jobs it has finished with shows here (docs/overhead.md, seventeenth round)
        "memory": memory,
        # runnable processes on the machine (1-minute average) before and after the rounds: above its
        # core count, other work shared the cores and every figure here is inflated
        "load_avg_1m": [round(load0, 2), round(load1, 2)], "cores": os.cpu_count(),
    }
    if as_json:
        print(json.dumps(out))
        return
    print(f"{model} batch {batch}: direct {a:.0f} req/s, pipeline {b:.0f} req/s, ratio {out['throughput_ratio']:.3f}; "
          f"added p50 {out['added_p50_ms']:.2f} ms per batch")
    if out["latency_hops_p50_ms"]:
        print("one job alone, ms at the median: " + ", ".join(f"{k.replace('_', ' ')} {v:.2f}"
                                                                for k, v in out["latency_hops_p50_ms"].items()))
    cost = out["cpu_us_per_request"]
    print("CPU µs per completed request: " + ", ".join(f"{k} {v:.1f}" for k, v in cost.items())
          + f"; Redis commands per request {out['redis_commands_per_request']:.3f}")
    print("resident MiB (peak): " + ", ".join(f"{k} {v['rss_mb']:.0f} ({v['peak_rss_mb']:.0f})"
                                              for k, v in memory.items()))


def _costs(meter: CpuMeter, completed: int, model_cpu_s: float) -> dict[str, Any]:
    """Each process's CPU per completed request; the worker's also without the model's own."""
    per = meter.per_request_us(completed)
    model_us = model_cpu_s * 1e6
    if "worker" in per:
        per["worker_excl_model"] = per["worker"] - model_us
    parts = [k for k in ("planner", "worker_excl_model", "producer", "redis") if k in per]
    per["total_excl_model"] = sum(per[k] for k in parts)
    return {"cpu_us_per_request": {k: round(v, 1) for k, v in per.items()}, "model_cpu_us_per_request": round(model_us, 1),
            "redis_commands_per_request": meter.calls / completed if completed else 0.0,
            # which commands: a round trip saved or added shows here by name
            "redis_commands_by_name_per_request": {k: round(v / completed, 4) for k, v in
                                                   sorted(meter.by_command.items(), key=lambda kv: -kv[1])}
            if completed else {}}


def register(bench_app: typer.Typer) -> None:
    bench_app.command("overhead")(overhead)
