"""``adaserve bench ...``: benchmarks that print figures (never asserted in tests)."""

from __future__ import annotations

import typer

from adaserve.bench import (
    apps_cmd,
    broker,
    chaos_cmd,
    fuzz,
    gpu,
    helios,
    hotpaths,
    live_cmd,
    mosel,
    native,
    orloj,
    overhead,
    placement_cmd,
    planner,
    serving,
)

bench_app = typer.Typer(help="Benchmarks: each prints its figures (``--json`` for one JSON object).", no_args_is_help=True)

for module in (overhead, hotpaths, broker, planner, orloj, mosel, serving, gpu, live_cmd, apps_cmd, chaos_cmd, fuzz,
               helios, native, placement_cmd):
    module.register(bench_app)


def register(app: typer.Typer) -> None:
    app.add_typer(bench_app, name="bench")
