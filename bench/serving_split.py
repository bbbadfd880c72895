"""The split section of ``adaserve bench serving``: effnet-lite0 whole vs split across two pools.

Two pipelines run at once on one server, in two namespaces: *whole* (planner, one worker of the
first pool) and *split* (planner with ``--split effnet-lite0=FIRST:SECOND``, a FIRST worker
running part 1 and forwarding the intermediate tensor through Redis to a SECOND worker running
part 2). The pools are ``cpu:cpu2`` by default, ``gpu:cpu`` on a GPU host (StarONNX's placement:
part 2 offloaded to the CPU); a pool named ``gpu*`` gets a GPU worker. Rounds alternate between
the pipelines, then time the runners in this process on the same devices: ``whole`` on the
stacked photos, and ``part1`` then ``part2`` on the same batch. CPU workers and runners have one
intra-op thread. The split adds a hop and a batch; the figure is that cost, the price of placing
the halves on different devices.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from adaserve.bench.serving_stack import BenchStack, summary, timed_calls, timed_jobs

MODEL = "effnet-lite0"
IMAGES = 5
WARM_UP = 3
POOLS = "cpu:cpu2"


def device_of(pool: str) -> str:
    """The device a worker of ``pool`` runs on (as ``adaserve worker`` resolves it)."""
    from adaserve.workers.config import WorkerConfig

    return WorkerConfig(pool=pool).resolved_device


def ensure_built(data_dir: Path, progress: Any, say: Callable[[str], None]) -> str | None:
    """Build effnet-lite0 into ``data_dir`` when it is missing; the reason to skip, or None."""
    from adaserve.broker.errors import AdaserveError, ModelNotFound
    from adaserve.models.registry import build_model, built_dir, load_info

    try:
        load_info(MODEL, data_dir)
        return None
    except ModelNotFound:
        pass
    say(f"{MODEL} is not built in {data_dir}: building it now (`adaserve models build --only {MODEL}`, about 15 s)")
    try:
        build_model(MODEL, built_dir(MODEL, data_dir), progress=progress)
    except AdaserveError as exc:
        return f"{MODEL} is not built and cannot be built here: {exc}"
    return None


def split(settings: Any, rounds: int, jobs: int, log_dir: Path, tick: Callable[[str], None],
          progress: Any, pools: str = POOLS, wire_dtype: str = "float32") -> dict[str, Any]:
    """Pipeline and direct medians for ``whole`` and ``split``, or ``{"skipped": reason}``; the
    jobs carry the photos as ``wire_dtype`` (the runners direct always get the model's float32)."""
    from adaserve.broker import load_settings
    from adaserve.models.datasets import sample_inputs
    from adaserve.planner.placement import parse_split
    from adaserve.producers import Client, make_job
    from adaserve.workers.runtime import load_runner

    reason = ensure_built(settings.data_dir, progress, progress.console.print)
    if reason:
        return {"skipped": reason}
    spec = parse_split(f"{MODEL}={pools}")
    images, _ = sample_inputs(MODEL, IMAGES, seed=0)
    batch = np.stack([x["image"] for x in images])
    sent = [{k: v.astype(wire_dtype) for k, v in x.items()} for x in images]
    where = {"whole": spec.first, "part1": spec.first, "part2": spec.second}
    runners = {v: load_runner(MODEL, v, device_of(p), settings.data_dir, threads=1) for v, p in where.items()}

    def both_parts() -> object:
        return runners["part2"].run({"intermediate": runners["part1"].run({"image": batch}).outputs["intermediate"]})

    calls = {"whole": lambda: runners["whole"].run({"image": batch}), "split": both_parts}
    other = load_settings(**{**settings.model_dump(), "namespace": settings.namespace + "s"})

    def make() -> Any:
        return make_job(MODEL, sent, 60_000.0, run="bench-serving")

    pipeline: dict[str, list[list[float]]] = {"whole": [], "split": []}
    direct: dict[str, list[list[float]]] = {"whole": [], "split": []}
    tick(f"{MODEL}: starting two pipelines")
    with BenchStack(settings, models=(MODEL,), log_dir=log_dir / "whole", pool=spec.first) as whole, \
            BenchStack(other, models=(MODEL,), extra_pools=(spec.second,), split=(f"{MODEL}={pools}",),
                       log_dir=log_dir / "split", pool=spec.first) as parted:
        stacks = {"whole": whole, "split": parted}
        for s in stacks.values():
            s.wait_ready()
        with Client(whole.settings) as cw, Client(parted.settings) as cs:
            clients = {"whole": cw, "split": cs}
            for mode in stacks:
                _check_placement(mode, timed_jobs(clients[mode], make, WARM_UP)[1])
                timed_calls(calls[mode], WARM_UP)
            for k in range(rounds):
                tick(f"{MODEL}: round {k + 1}/{rounds}")
                for mode in stacks:
                    times, results = timed_jobs(clients[mode], make, jobs)
                    _check_placement(mode, results)
                    pipeline[mode].append(times)
                for mode in stacks:
                    direct[mode].append(timed_calls(calls[mode], jobs))
                for s in stacks.values():
                    s.check()
    tick(f"{MODEL}: done")
    return {"model": MODEL, "images_per_job": IMAGES, "planner_split": f"{MODEL}={pools}", "wire_dtype": wire_dtype,
            "job_bytes": sum(v.nbytes for x in sent for v in x.values()),
            "devices": {v: device_of(p) for v, p in where.items()},
            "whole": summary(pipeline["whole"], direct["whole"]), "split": summary(pipeline["split"], direct["split"])}


def _check_placement(mode: str, results: list[Any]) -> None:
    """Fail loudly when the pipeline did not run what this section claims to measure."""
    from adaserve.broker.errors import AdaserveError

    for res in results:
        for r in res.results:
            parted = r.plan is not None and r.plan.placement.part is not None
            if parted != (mode == "split"):
                raise AdaserveError(f"a job of the {mode} pipeline ran {MODEL} with placement "
                                    f"{r.plan.placement if r.plan else None}; expected "
                                    f"{'two parts' if mode == 'split' else 'the whole model'}")
