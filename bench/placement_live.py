"""The live section of ``adaserve bench placement``: HEFT through the real pipeline at rising rates.

On a GPU host the pools are ``gpu`` and ``cpu``, seeded from the measured profile. On a CPU host
two CPU pools stand for the two devices (``fast`` as the GPU kind, ``slow`` as the CPU kind,
seeded from runners timed here, the slow kind's figures taken ``SLOW`` times, since both are this
same CPU): that exercises the path end to end and is labelled so; its figures are no GPU's.
Planner and workers run in this process (threads), on the bench's server.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

MODEL = "effnet-lite0"
SLOW = 10.0
MAX_BATCH = 8  # 14 float32 photos pass the 8 MiB message limit


def _profile(data_dir: Path, out: Path, images: np.ndarray, slow: float) -> Path:
    from adaserve.workers.runtime import load_runner

    part1 = load_runner(MODEL, "part1", "cpu", data_dir, threads=1)
    rows = []
    for variant in ("whole", "part1", "part2"):
        runner = load_runner(MODEL, variant, "cpu", data_dir, threads=1)
        for b in (1, MAX_BATCH):
            x = images[:b]
            feed = {"intermediate": part1.run({"image": x}).outputs["intermediate"]} if variant == "part2" else {"image": x}
            times = []
            for _ in range(6):
                t0 = time.perf_counter()
                runner.run(feed)
                times.append((time.perf_counter() - t0) * 1000.0)
            ms = min(times[1:])  # a shared machine: the least is the device's time
            rows.append({"model": MODEL, "variant": variant, "kind": "whole" if variant == "whole" else "part",
                         "batch": b, "cpu_p50_ms": slow * ms, "gpu_p50_ms": ms})
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"bench": "gpu", "rows": rows}))
    return out


def live(settings: Any, progress: Any, *, rates: tuple[float, ...], seconds: float, profile: Path | None,
         gpu: bool) -> dict[str, Any]:
    """Per rate (photos/s, one per job): p99 and p50 latency, requests completed, placements and
    HEFT's prediction error; or ``{"skipped": reason}``."""
    from adaserve.bench.serving_split import ensure_built
    from adaserve.broker import Keys, decode
    from adaserve.broker.connection import connect
    from adaserve.broker.events import BatchDispatched, PlacementFinished
    from adaserve.models.datasets import sample_inputs
    from adaserve.planner.config import PlannerConfig
    from adaserve.planner.service import Planner
    from adaserve.producers import Client, make_job
    from adaserve.workers import Worker, WorkerConfig

    reason = ensure_built(settings.data_dir, progress, progress.console.print)
    if reason:
        return {"skipped": reason}
    first, second = ("gpu", "cpu") if gpu else ("fast", "slow")
    images, _ = sample_inputs(MODEL, 16, seed=0)
    stack = np.stack([x["image"] for x in images])
    if gpu and profile is not None:
        seeds = profile
    else:
        seeds = _profile(settings.data_dir, settings.data_dir / "bench" / "placement-live-profile.json", stack, SLOW)
    config = PlannerConfig(max_batch=MAX_BATCH, placement="heft", heft_profile=str(seeds),
                           pool_kind=(f"{first}=gpu", f"{second}=cpu"))
    stop = threading.Event()
    threads: list[threading.Thread] = []
    keys = Keys(settings.namespace)
    r = connect(settings)
    out: list[dict[str, Any]] = []
    try:
        for pool in (first, second):
            w = Worker(settings, WorkerConfig(pool=pool, models=(MODEL,), threads=1, slots=1,
                                              name=f"bench-{pool}-{uuid.uuid4().hex[:4]}"))
            threads.append(threading.Thread(target=w.run, args=(stop,), daemon=True))
            threads[-1].start()
            if not w.ready.wait(120):
                return {"skipped": f"the {pool} worker did not start"}
        planner = Planner(settings, config)
        threads.append(threading.Thread(target=planner.run, args=(stop,), daemon=True))
        threads[-1].start()
        task = progress.add_task("placement live", total=len(rates))
        with Client(settings) as client:
            client.submit(make_job(MODEL, images[:1], 60_000)).result(120)  # warm: sessions, connections
            for rate in rates:
                since = r.xrevrange(keys.telemetry, count=1)
                mark = since[0][0] if since else b"0-0"
                handles = []
                t0 = time.perf_counter()
                for i in range(max(int(rate * seconds), 1)):
                    wait = t0 + i / rate - time.perf_counter()
                    if wait > 0:
                        time.sleep(wait)
                    handles.append(client.submit(make_job(MODEL, images[i % len(images):][:1], 120_000)))
                results = [h.result(180) for h in handles]
                total = [x.timings.total_ms for j in results for x in j.results if x.timings is not None]
                evs = [decode(f[b"m"]) for _, f in r.xrange(keys.telemetry, min=b"(" + mark)]
                sent = [e for e in evs if isinstance(e, BatchDispatched) and e.placement]
                errs = sorted(abs(e.error_ms) for e in evs if isinstance(e, PlacementFinished))
                out.append({"rate": rate, "requests": len(total), "completed": sum(j.completed for j in results),
                            "p50_ms": statistics.median(total), "p99_ms": sorted(total)[int(0.99 * (len(total) - 1))],
                            "placements": dict(Counter(e.placement for e in sent)),
                            "mean_batch": statistics.fmean(e.size for e in sent) if sent else 0.0,
                            "prediction_error_median_ms": errs[len(errs) // 2] if errs else None})
                progress.advance(task)
    finally:
        stop.set()
        for t in threads:
            t.join(20)
        r.close()
    where = ("GPU host: pools gpu and cpu" if gpu else
             f"this CPU host: two CPU pools standing for the devices ({first} as the GPU kind, {second} as the CPU "
             f"kind, seeded {SLOW:g}x slower); the path end to end, not GPU figures")
    return {"where": where, "pools": [first, second], "max_batch": MAX_BATCH, "seconds": seconds, "rates": out}
