"""Commands of adaserve.loadgen (``produce``), added to the `adaserve` CLI by `register`."""

from __future__ import annotations

import typer

from adaserve.broker.errors import AdaserveError
from adaserve.broker.settings import load_connected_settings
from adaserve.process import cli_error


def produce(
    model: str = typer.Option("fsdd-cnn", help="Model (task family) the jobs ask for."),
    rate: float = typer.Option(20.0, help="Mean arrival rate, jobs per second."),
    duration: float = typer.Option(30.0, help="How long to send, seconds."),
    requests_per_job: int = typer.Option(1, "--requests-per-job", "-k", help="Requests per job."),
    deadline_ms: float = typer.Option(200.0, help="Job deadline, ms after submission."),
    min_accuracy: float = typer.Option(0.0, help="Accuracy floor of each job (0-1)."),
    app: str = typer.Option("default", help="Application name the jobs carry."),
    run: str | None = typer.Option(None, help="Run id tag (Job.run); a fresh one by default."),
    pattern: str = typer.Option("poisson", help="Arrival process: constant, poisson or trace."),
    trace: str = typer.Option("conv", help="Trace replayed by --pattern trace: conv or code."),
    seed: int = typer.Option(0, help="Seed of the arrivals and of the input sample."),
    grace: float = typer.Option(10.0, help="Seconds to wait for stragglers after the last send."),
    kind: str = typer.Option("auto", help="Request kind: auto (generate for language models), forward or generate."),
    max_new_tokens: int | None = typer.Option(None, help="Tokens each generation request asks for (default: the model's)."),
    temperature: float = typer.Option(0.0, help="Sampling temperature of generation requests (0: greedy)."),
    form: str = typer.Option("auto", help="How jobs are sent: auto (columns for forward requests), rows or columns."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as one JSON object."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar (stderr)."),
) -> None:
    """Send real held-out inputs at a given rate and report per-request outcomes."""
    from adaserve.loadgen.load import load_options, run_load

    try:
        settings = load_connected_settings()
        values = dict(model=model, rate=rate, duration_s=duration, requests_per_job=requests_per_job,
                      deadline_ms=deadline_ms, min_accuracy=min_accuracy, app=app, pattern=pattern,
                      trace=trace, seed=seed, grace_s=grace, kind=kind, temperature=temperature, form=form)
        if max_new_tokens is not None:
            values["max_new_tokens"] = max_new_tokens
        opts = load_options(**values, **({"run": run} if run else {}))
        summary = run_load(settings, opts, progress=progress)
    except AdaserveError as exc:
        raise cli_error(exc) from None
    from adaserve.loadgen.summary import nothing_completed

    if json_out:
        typer.echo(summary.model_dump_json())
    else:
        from adaserve.loadgen.report import print_summary

        print_summary(summary)
    problem = nothing_completed(summary)
    if problem is not None:
        # A run that served nothing is a failure to scripts and CI too, not just to the reader.
        raise cli_error(RuntimeError(problem))


def register(app: typer.Typer) -> None:
    """Add this package's commands (and sub-command groups) to the top-level app."""
    app.command("produce")(produce)
