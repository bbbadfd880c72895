"""``adaserve bench serving``: what the pipeline adds to generation and to a split model.

* **generation**: a job of 8 held-out prompts of 8-32 characters x ``--new-tokens`` tokens, per
  language model, through a fresh pipeline (server, planner, one worker with one intra-op thread)
  against the same variant's ``LmRunner`` called in this process on the same packed batch.
* **split**: effnet-lite0 on 5 photos, whole and split across two CPU pools, through the pipeline
  and directly (see ``serving_split``).

Each round times ``--jobs`` sequential pipeline jobs, then as many direct calls, on the same
running pipeline; figures are medians over every round's jobs, with each round's medians kept in
``runs``. ``ratio`` is pipeline / direct. With ``--json``, one JSON object on the last stdout line.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from adaserve.bench.serving_stack import BenchStack, summary, timed_calls, timed_jobs

PROMPTS = 8
WARM_UP = 3
SECTIONS = ("generation", "split")


def direct_feed(runner: Any, prompts: list[dict[str, Any]], new_tokens: int) -> dict[str, Any]:
    """The batch a worker builds for these prompts (greedy, as the pipeline's jobs ask)."""
    from adaserve.workers.generate import Prompt, pack

    return pack([Prompt(p["tokens"].astype("int64"), new_tokens, 0.0, 0, False) for p in prompts], runner.pad_id)


def generation(settings: Any, model: str, rounds: int, jobs: int, new_tokens: int, log_dir: Path,
               tick: Callable[[str], None]) -> dict[str, Any]:
    """One model's pipeline and direct medians; the direct side runs the variant the pipeline ran."""
    from adaserve.models.datasets import sample_inputs
    from adaserve.producers import Client, make_job
    from adaserve.workers.runtime import load_runner

    prompts, _ = sample_inputs(model, PROMPTS, seed=0)

    def make() -> Any:
        return make_job(model, prompts, 60_000.0, kind="generate", run="bench-serving",
                        generation={"max_new_tokens": new_tokens})

    pipeline: list[list[float]] = []
    direct: list[list[float]] = []
    with BenchStack(settings, models=(model,), log_dir=log_dir / model) as stack:
        tick(f"{model}: starting the pipeline")
        stack.wait_ready()
        with Client(stack.settings) as client:
            _, warm = timed_jobs(client, make, WARM_UP)
            plan = warm[-1].results[0].plan
            variant = plan.variant if plan is not None else "default"
            runner = load_runner(model, variant, "cpu", settings.data_dir, threads=1)
            feed = direct_feed(runner, prompts, new_tokens)
            timed_calls(lambda: runner.run(feed), WARM_UP)
            for k in range(rounds):
                tick(f"{model}: round {k + 1}/{rounds}")
                pipeline.append(timed_jobs(client, make, jobs)[0])
                direct.append(timed_calls(lambda: runner.run(feed), jobs))
                stack.check()
    return {"model": model, "variant": runner.variant, "requests_per_job": len(prompts), "new_tokens": new_tokens,
            "prompt_lengths": [int(p["tokens"].size) for p in prompts], **summary(pipeline, direct)}


def serving(
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (last stdout line)."),
    rounds: int = typer.Option(5, min=1, help="Rounds; each times --jobs pipeline jobs, then as many direct calls."),
    jobs: int = typer.Option(10, min=1, max=1000, help="Sequential jobs (and direct calls) per round."),
    models: str = typer.Option("ee-lm-xs,ee-lm-s", help="Language models of the generation section."),
    new_tokens: int = typer.Option(16, min=1, max=64, help="Tokens generated per prompt."),
    only: str = typer.Option("generation,split", help="Sections to run: generation, split or both."),
    split_pools: str = typer.Option("cpu:cpu2", "--split-pools", help="FIRST:SECOND pools of the split section; "
                                                                      "gpu:cpu on a GPU host (pools named gpu* get a "
                                                                      "GPU worker)."),
    wire_dtype: str = typer.Option("float32", "--wire-dtype", help="dtype the split section's jobs carry their photos "
                                                                   "in: float32 or float16 (half the bytes)."),
) -> None:
    """Latency of generation jobs and of a split model through the pipeline vs the runners direct."""
    from rich.console import Console
    from rich.progress import Progress

    from adaserve.bench.server import bench_settings
    from adaserve.bench.serving_split import split
    from adaserve.broker.errors import AdaserveError
    from adaserve.models.datasets import LM_MODELS

    wanted = [s.strip() for s in only.split(",") if s.strip()]
    if not wanted or any(s not in SECTIONS for s in wanted):
        raise typer.BadParameter(f"sections must be among {', '.join(SECTIONS)}; got {only!r}", param_hint="--only")
    names = [m.strip() for m in models.split(",") if m.strip()]
    if "generation" in wanted and (not names or any(m not in LM_MODELS for m in names)):
        raise typer.BadParameter(f"generation needs language models among {', '.join(LM_MODELS)}; got {models!r}",
                                 param_hint="--models")
    from adaserve.broker.errors import ConfigError
    from adaserve.planner.placement import parse_split

    try:
        parse_split(f"m={split_pools}")
    except ConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="--split-pools") from None
    if wire_dtype not in ("float32", "float16"):
        raise typer.BadParameter(f"must be float32 or float16, got {wire_dtype!r}", param_hint="--wire-dtype")
    console = Console(stderr=True)
    report: dict[str, Any] = {"bench": "serving", "rounds": rounds, "jobs_per_round": jobs, "worker_threads": 1}
    try:
        with bench_settings() as settings, Progress(console=console, transient=as_json) as bar:
            log_dir = settings.data_dir / "logs" / "bench-serving"  # the children's logs, appended run after run
            steps = ((len(names) * (rounds + 1) if "generation" in wanted else 0)
                     + (rounds + 2 if "split" in wanted else 0))
            task = bar.add_task("serving", total=steps)

            def tick(what: str) -> None:
                bar.update(task, advance=1, description=what)

            if "generation" in wanted:
                report["generation"] = [generation(settings, m, rounds, jobs, new_tokens, log_dir, tick) for m in names]
            if "split" in wanted:
                report["split"] = split(settings, rounds, jobs, log_dir, tick, bar, split_pools, wire_dtype)
    except AdaserveError as exc:
        console.print(f"[red]adaserve bench serving: {exc}[/red]")
        raise typer.Exit(2) from None
    if as_json:
        typer.echo(json.dumps(report))
    else:
        _print(Console(), report)


def _cell(fig: dict[str, Any], key: str) -> str:
    """The median over every job, then the spread of the rounds' medians."""
    xs = [r[key] for r in fig["runs"]]
    return f"{fig[key]:.1f} ({min(xs):.1f}-{max(xs):.1f})"


def _print(console: Any, report: dict[str, Any]) -> None:
    """The figures as one table on stdout (progress went to stderr)."""
    from rich.table import Table

    gen, s = report.get("generation", []), report.get("split")
    what = [f"{g['requests_per_job']} prompts x {g['new_tokens']} new tokens" for g in gen[:1]]
    if s and "skipped" not in s:
        what.append(f"{s['images_per_job']} photos")
    t = Table(title=f"ms per job ({'; '.join(what)}): median of {report['rounds']} rounds x "
                    f"{report['jobs_per_round']} jobs (rounds' medians min-max)")
    for col in ("job", "pipeline", "direct", "ratio", "added"):
        t.add_column(col, justify="left" if col == "job" else "right")
    rows = [(f"{g['model']} {g['variant']}", g) for g in gen]
    if s and "skipped" not in s:
        rows += [(f"{s['model']} {mode}", s[mode]) for mode in ("whole", "split")]
    for label, fig in rows:
        t.add_row(label, _cell(fig, "pipeline_p50_ms"), _cell(fig, "direct_p50_ms"), f"{fig['ratio']:.2f}",
                  f"{fig['added_p50_ms']:.1f}")
    console.print(t)
    if s and "skipped" in s:
        console.print(f"split: skipped ({s['skipped']})")


def register(bench_app: typer.Typer) -> None:
    """Add the `serving` benchmark to `adaserve bench`."""
    bench_app.command("serving")(serving)
