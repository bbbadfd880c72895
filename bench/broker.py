"""``adaserve bench broker``: jobs per second one producer ingests with pipelining."""

from __future__ import annotations

import json
import statistics

import typer


def broker(
    jobs: int = typer.Option(5000, min=100, help="Jobs per repeat (one 1x32x32 float32 request each)."),
    chunk: int = typer.Option(256, min=1, help="Jobs per pipelined round trip."),
    repeats: int = typer.Option(5, min=1, help="Repeats; the median is reported."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Measure producer ingest: validate, encode and XADD jobs with pipelining."""
    from rich.progress import track

    from adaserve.bench.server import bench_settings
    from adaserve.producers import measure_ingest

    with bench_settings() as settings:
        measure_ingest(settings, jobs=min(jobs, 500), chunk=chunk, shape=(1, 32, 32))  # warm-up
        runs = [measure_ingest(settings, jobs=jobs, chunk=chunk, shape=(1, 32, 32))
                for _ in track(range(repeats), description="ingest", transient=True, disable=as_json)]
        unpiped = measure_ingest(settings, jobs=min(jobs, 1000), chunk=1, shape=(1, 32, 32))
    out = {
        "jobs_per_s": statistics.median(r.jobs_per_s for r in runs),
        "jobs_per_s_runs": [round(r.jobs_per_s, 1) for r in runs],
        "unpipelined_jobs_per_s": unpiped.jobs_per_s,
        "message_bytes": runs[0].message_bytes,
        "jobs": jobs, "chunk": chunk, "repeats": repeats,
    }
    if as_json:
        print(json.dumps(out))
    else:
        print(f"one producer ingests {out['jobs_per_s']:.0f} jobs/s (median of {repeats}; "
              f"{out['unpipelined_jobs_per_s']:.0f} jobs/s without pipelining; {out['message_bytes']} B per job)")


def register(bench_app: typer.Typer) -> None:
    bench_app.command("broker")(broker)
