"""Commands of adaserve.telemetry, added to the `adaserve` CLI by `register`."""

from __future__ import annotations

import re

import typer

from adaserve.broker.errors import AdaserveError, ConfigError, InvalidArgument
from adaserve.broker.settings import load_connected_settings
from adaserve.process import cli_error

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_window(text: str) -> float:
    """``90``, ``60s``, ``5m``, ``1h``, ``250ms`` -> seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*", text)
    if not m or float(m.group(1)) <= 0:
        raise ConfigError(f"window {text!r} is not a positive duration such as 60s, 5m or 1h")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def tail(
    type_: list[str] | None = typer.Option(None, "--type", "-t", help="Event type or glob (job.*); repeatable."),
    app: str | None = typer.Option(None, help="Only events of this app."),
    run: str | None = typer.Option(None, help="Only events of this run id."),
    follow: bool = typer.Option(True, "--follow/--no-follow", help="Keep printing new events."),
    count: int = typer.Option(10, "--count", "-n", help="Recent events to print first."),
    heartbeats: bool = typer.Option(False, "--heartbeats", help="Also print worker heartbeats (one per worker "
                                    "per second; hidden unless asked for, by this or a --type they match)."),
    json_out: bool = typer.Option(False, "--json", help="JSON Lines: one JSON object per event."),
) -> None:
    """Print telemetry events, newest last, and follow new ones (Ctrl-C to stop)."""
    from rich.console import Console

    from adaserve.broker.connection import connect
    from adaserve.telemetry.reader import EventFilter, TelemetryReader, parse_types, shown_types
    from adaserve.telemetry.render import event_json, event_line

    console = Console(highlight=False, soft_wrap=True)
    try:
        keep = EventFilter(shown_types(parse_types(type_), heartbeats), app, run)
        settings = load_connected_settings()
        reader = TelemetryReader(connect(settings, block_ms=500), settings)
        after = reader.latest_id()
        recent = reader.last(count, keep=keep) if count > 0 else []
        for got in recent:
            typer.echo(event_json(got)) if json_out else console.print(event_line(got))
        if follow:
            for got in reader.follow(after=after, keep=keep, block_ms=500):
                typer.echo(event_json(got)) if json_out else console.print(event_line(got))
    except KeyboardInterrupt:
        return
    except (AdaserveError, ValueError) as exc:
        raise cli_error(exc, usage=(ValueError,)) from None


def stats(
    window: str = typer.Option("60s", "--window", "--since", help="Time window back from now (60s, 5m, 1h)."),
    run: str | None = typer.Option(None, help="Aggregate one run id instead of a window."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Finish rate, SLO violations, latency and throughput, per app, pool and worker; rates are
    over the time load ran in the window, not the whole window."""
    from adaserve.broker.connection import connect
    from adaserve.telemetry.reader import EventFilter, TelemetryReader
    from adaserve.telemetry.render import print_stats
    from adaserve.telemetry.stats import aggregate

    try:
        settings = load_connected_settings()
        reader = TelemetryReader(connect(settings), settings)
        if run:
            result = aggregate((g.event for g in reader.history(keep=EventFilter(run=run))), run=run)
        else:
            seconds = parse_window(window)
            since = reader.server_ms() - int(seconds * 1000)
            result = aggregate((g.event for g in reader.history(since_ms=since)), window_s=seconds)
    except AdaserveError as exc:
        raise cli_error(exc, usage=(ValueError,)) from None
    if json_out:
        typer.echo(result.model_dump_json())
    else:
        print_stats(result)


def top(
    interval: float = typer.Option(1.0, "--interval", "-i", min=0.1, help="Seconds between refreshes."),
    window: str = typer.Option("10s", "--window", help="Rates and percentiles over this much recent time."),
    once: bool = typer.Option(False, "--once", help="Print one frame and exit (for scripts and tests)."),
    json_out: bool = typer.Option(False, "--json", help="With --once: the frame as one JSON object."),
) -> None:
    """A live dashboard: per model, pool and worker, refreshed every second (Ctrl-C to stop)."""
    from adaserve.telemetry.live import run_top

    try:
        if json_out and not once:
            raise InvalidArgument("--json prints one frame: use it with --once")
        window_s = parse_window(window)
        run_top(load_connected_settings(), interval_s=interval, window_s=window_s, once=once, json_out=json_out)
    except KeyboardInterrupt:
        return
    except AdaserveError as exc:
        raise cli_error(exc, usage=(ValueError,)) from None


def dead(
    count: int = typer.Option(20, "--count", "-n", help="How many recent dead letters."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """List recent dead letters: why each message could not be served (sizes, not bytes)."""
    import json

    from adaserve.broker.connection import connect
    from adaserve.telemetry.dead import dead_count, read_dead
    from adaserve.telemetry.render import print_dead

    try:
        settings = load_connected_settings()
        r = connect(settings)
        letters, total = read_dead(r, settings, count), dead_count(r, settings)
    except AdaserveError as exc:
        raise cli_error(exc, usage=(ValueError,)) from None
    if json_out:
        typer.echo(json.dumps({"total": total, "letters": [d.model_dump() for d in letters]}))
    else:
        print_dead(letters, total)


def exporter(
    port: int = typer.Option(9464, "--port", min=0, max=65535, help="HTTP port of /metrics (0: any free port)."),
    addr: str = typer.Option("0.0.0.0", "--addr", help="Address to listen on."),
    log_level: str = typer.Option("INFO", "--log-level", help="Logging level."),
) -> None:
    """Serve Prometheus metrics (queue depths, slots, request counts, latency histograms) until SIGTERM."""
    from adaserve.process import setup_logging, stop_on_signals
    from adaserve.telemetry.exporter import Exporter

    setup_logging(log_level)
    stop = stop_on_signals()
    try:
        exp = Exporter(load_connected_settings(), port=port, addr=addr)
        exp.serve()
        try:
            exp.run(stop)
        finally:
            exp.close()
    except AdaserveError as exc:
        raise cli_error(exc) from None


def health(
    planner: bool = typer.Option(False, "--planner", help="Check a planner of this host."),
    worker: bool = typer.Option(False, "--worker", help="Check a worker of this host."),
    name: str = typer.Option("", "--name", help="Planner or worker name, or the start of it (default: any process "
                                                "of this host, whose names carry the host name)."),
) -> None:
    """Exit 0 when the process reported within its TTL (a container healthcheck), else 1 with why."""
    from adaserve.broker.connection import connect
    from adaserve.telemetry.health import check

    if planner == worker:
        raise cli_error("say --planner or --worker")
    try:
        settings = load_connected_settings()
        ok, line = check(connect(settings), settings, "planner" if planner else "worker", name or None)
    except AdaserveError as exc:
        raise cli_error(exc) from None
    typer.echo(line)
    if not ok:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add this package's commands (and sub-command groups) to the top-level app."""
    app.command("tail")(tail)
    app.command("stats")(stats)
    app.command("top")(top)
    app.command("dead")(dead)
    app.command("exporter")(exporter)
    app.command("health")(health)
