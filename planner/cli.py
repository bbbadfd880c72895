"""Commands of adaserve.planner: ``adaserve planner`` (the service) and ``adaserve sim``."""

from __future__ import annotations

import typer

from adaserve.planner.config import DEFAULT_APP_RATIO, DEFAULT_QUEUE_MS
from adaserve.planner.sim import cli as sim_cli


def planner(
    policy: str = typer.Option("orloj", help="Batching policy: orloj, edf, fifo, clipper, nexus, clockwork."),
    max_batch: int = typer.Option(32, min=1, max=1024, help="Largest batch the planner forms."),
    name: str = typer.Option("", help="Consumer name in the planners group (default: host-pid)."),
    split: list[str] | None = typer.Option(
        None, "--split", help="MODEL=FIRST:SECOND: batches of MODEL sent to pool FIRST run its part 1 there and "
                              "part 2 on pool SECOND (e.g. effnet-lite0=gpu:cpu). Repeatable."),
    modality: str = typer.Option(
        "optimized", envvar="ADASERVE_MODALITY_POLICY",
        help="MOSEL modality selection for models with modality subsets (av-digits): optimized, random, "
             "aggressive or none."),
    online_feedback: str = typer.Option(
        "auto", help="ORLOJ's long-term feedback (re-running sampled requests alone on the profiling queue): "
                     "auto (while an `adaserve profiler` worker runs), on, or off."),
    admission: bool = typer.Option(
        True, "--admission/--no-admission",
        help="Refuse at once (reason `overloaded`, with when to retry) a job the queue ahead cannot serve "
             "by its deadline, rather than queue it to expire."),
    max_queue: int = typer.Option(0, min=0, help="Most requests queued per model before new jobs are "
                                                 "refused `overloaded` (0: no fixed bound)."),
    queue_ms: float = typer.Option(
        DEFAULT_QUEUE_MS, min=0.0, max=10_000.0, envvar="ADASERVE_QUEUE_MS",
        help="Work, in ms of the pool's recent batches, the planner queues at each worker beyond the batch it "
             "runs; a pool of long batches (a language model) then holds fewer than its slots, and requests "
             "wait at the planner, where they can join larger batches. 0: every slot."),
    app_ratio: float = typer.Option(
        DEFAULT_APP_RATIO, min=0.0, max=1000.0, envvar="ADASERVE_APP_RATIO",
        help="ORLOJ: apps whose requests cost more than this many times each other's (measured from their "
             "batches) are batched apart, each group with its own queues; 0: all apps share batches."),
    allow_non_finite: list[str] | None = typer.Option(
        None, "--allow-non-finite", metavar="MODEL",
        help="Admit float inputs holding NaN or ±Inf for MODEL (rejected as non_finite otherwise); adds to "
             "ADASERVE_LIMIT_ALLOW_NON_FINITE. Repeatable."),
    placement: str = typer.Option(
        "static", help="Placement: static (the pool with a free slot; --split as given) or heft (per batch, the "
                       "earliest finish from performance histories: whole on a GPU or CPU pool, or part 1 on the "
                       "GPU and part 2 on the CPU; see docs/placement.md)."),
    heft_profile: str = typer.Option("", help="A `bench gpu --json` report seeding HEFT's histories "
                                              "(e.g. docs/gpu-h100.json); without it they start from measurements."),
    pool_kind: list[str] | None = typer.Option(
        None, "--pool-kind", help="POOL=KIND: a pool's device kind for HEFT (default: gpu* pools gpu, others cpu). "
                                  "Repeatable."),
    log_level: str = typer.Option("INFO", help="Logging level."),
) -> None:
    """Run the planner: read jobs, plan and batch them, dispatch to worker pools."""
    from adaserve.broker import AdaserveError, load_settings
    from adaserve.broker.heap import keep_freed_memory
    from adaserve.broker.settings import load_limits
    from adaserve.planner.config import PlannerConfig
    from adaserve.planner.service import Planner
    from adaserve.process import cli_error, settle_heap, setup_logging, stop_on_signals

    try:
        config = PlannerConfig(policy=policy, max_batch=max_batch, name=name, split=tuple(split or ()),
                               modality=modality, online_feedback=online_feedback, admission=admission,
                               max_queue=max_queue, queue_ms=queue_ms, placement=placement, heft_profile=heft_profile,
                               pool_kind=tuple(pool_kind or ()), app_ratio=app_ratio)
        limits = load_limits()
        if allow_non_finite:
            limits = load_limits(allow_non_finite=(*limits.allow_non_finite, *allow_non_finite))
    except AdaserveError as exc:
        raise cli_error(exc) from None
    setup_logging(log_level)
    stop = stop_on_signals()
    try:
        settings = load_settings()
        keep_freed_memory(settings.heap_keep_mb)
        planner = Planner(settings, config, limits=limits)
        settle_heap()
        planner.run(stop)
    except AdaserveError as exc:  # a bad setting, or an outage past ADASERVE_MAX_OUTAGE_S
        raise cli_error(exc) from None


def register(app: typer.Typer) -> None:
    from adaserve.planner.heft import cli as heft_cli

    app.command("planner")(planner)
    sim_cli.register(app)
    heft_cli.register(app)
