"""What ``adaserve bench serving`` shares between its sections: the stack and the stopwatch.

Both sides of a comparison are timed the same way, from the caller: a pipeline job from
``submit`` until its last result is back in the producer (so it includes encoding, Redis, the
planner, the worker and the finaliser), a direct call around ``runner.run`` only. One job is
outstanding at a time, so the figures are latencies, not throughput.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from adaserve.broker import Settings
from adaserve.broker.errors import AdaserveError
from adaserve.stack import Stack

JOB_TIMEOUT_S = 60.0


class BenchStack(Stack):
    """A ``Stack`` whose one main worker serves ``pool`` (``cpu``, or ``gpu`` for a GPU worker) and
    preloads only the benchmarked models, plus one worker per extra pool (the second half of a
    split). Loading every built model would cost start-up time and memory on a small machine and
    changes nothing that is measured."""

    def __init__(self, settings: Settings, *, models: Sequence[str], extra_pools: Sequence[str] = (),
                 log_dir: Path, split: tuple[str, ...] = (), pool: str = "cpu") -> None:
        # The planner hands a batch to the serving pool with the most free slots. The second pool
        # of a split serves the model too, so it gets one slot against the first pool's three:
        # with one job outstanding every batch then goes to the first pool and is split.
        super().__init__(settings, cpu_workers=1, gpu_worker=False, worker_threads=1, log_dir=log_dir,
                         split=split, slots=3)
        self.models = ",".join(models)
        self.pool = pool
        self.extra_pools = tuple(extra_pools)

    def _spawn(self, name: str, args: list[str], env: dict[str, str]) -> None:
        if args[0] == "worker":
            args = [*args, "--models", self.models]
            if name.startswith("worker-cpu-"):  # the main worker: Stack starts it in pool cpu
                args[args.index("--pool") + 1] = self.pool
        super()._spawn(name, args, env)

    def start(self) -> BenchStack:
        super().start()
        try:
            for pool in self.extra_pools:
                self._spawn(f"worker-extra-{pool}", ["worker", "--pool", pool, "--slots", "1", "--threads", "1"],
                            self._env)
        except BaseException:
            self.stop()  # __exit__ does not run when __enter__ raises
            raise
        return self


def timed_jobs(client: Any, make: Callable[[], Any], n: int) -> tuple[list[float], list[Any]]:
    """``n`` sequential jobs: wall ms each, and the results (every request must complete)."""
    times, results = [], []
    for _ in range(n):
        t = time.perf_counter()
        res = client.submit(make()).result(JOB_TIMEOUT_S)
        times.append((time.perf_counter() - t) * 1000.0)
        if not res.ok:
            raise AdaserveError(f"a {res.model} job did not complete: {res.reasons}")
        results.append(res)
    return times, results


def timed_calls(fn: Callable[[], object], n: int) -> list[float]:
    """``n`` calls of ``fn``: wall ms each."""
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000.0)
    return times


def summary(pipeline: list[list[float]], direct: list[list[float]]) -> dict[str, Any]:
    """Medians over every timed job / call of every round, their ratio, and each round's medians."""
    p = statistics.median(x for r in pipeline for x in r)
    d = statistics.median(x for r in direct for x in r)
    return {
        "pipeline_p50_ms": round(p, 3), "direct_p50_ms": round(d, 3), "ratio": round(p / d, 3),
        "added_p50_ms": round(p - d, 3),
        "runs": [{"pipeline_p50_ms": round(statistics.median(a), 3), "direct_p50_ms": round(statistics.median(b), 3)}
                 for a, b in zip(pipeline, direct)],
    }
