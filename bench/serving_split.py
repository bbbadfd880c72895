"""The split section of ``adaserve bench serving``: effnet-lite0 whole vs split across two CPU pools.

Two pipelines run at once on one server, in two namespaces: *whole* (planner, one ``cpu``
worker) and *split* (planner with ``--split effnet-lite0=cpu:cpu2``, a ``cpu`` worker running
part 1 and forwarding the intermediate tensor through Redis to a ``cpu2`` worker running part 2).
Rounds alternate between them, then time the runners in this process: ``whole`` on the stacked
photos, and ``part1`` then ``part2`` on the same batch. Every worker and runner has one intra-op
thread. On one machine the split can only add cost (a second hop, an extra batch); the figure is
that cost, the price of placing the halves on different devices.
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
SPLIT = f"{MODEL}=cpu:cpu2"


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
          progress: Any) -> dict[str, Any]:
    """Pipeline and direct medians for ``whole`` and ``split``, or ``{"skipped": reason}``."""
    from adaserve.broker import load_settings
    from adaserve.models.datasets import sample_inputs
    from adaserve.producers import Client, make_job
    from adaserve.workers.runtime import load_runner

    reason = ensure_built(settings.data_dir, progress, progress.console.print)
    if reason:
        return {"skipped": reason}
    images, _ = sample_inputs(MODEL, IMAGES, seed=0)
    batch = np.stack([x["image"] for x in images])
    runners = {v: load_runner(MODEL, v, "cpu", settings.data_dir, threads=1) for v in ("whole", "part1", "part2")}

    def both_parts() -> object:
        return runners["part2"].run({"intermediate": runners["part1"].run({"image": batch}).outputs["intermediate"]})

    calls = {"whole": lambda: runners["whole"].run({"image": batch}), "split": both_parts}
    other = load_settings(**{**settings.model_dump(), "namespace": settings.namespace + "s"})

    def make() -> Any:
        return make_job(MODEL, images, 60_000.0, run="bench-serving")

    pipeline: dict[str, list[list[float]]] = {"whole": [], "split": []}
    direct: dict[str, list[list[float]]] = {"whole": [], "split": []}
    tick(f"{MODEL}: starting two pipelines")
    with BenchStack(settings, models=(MODEL,), log_dir=log_dir / "whole") as whole, \
            BenchStack(other, models=(MODEL,), extra_pools=("cpu2",), split=(SPLIT,),
                       log_dir=log_dir / "split") as parted:
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
    return {"model": MODEL, "images_per_job": IMAGES, "planner_split": SPLIT,
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
