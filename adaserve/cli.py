"""The ``adaserve`` command: a thin typer app over library calls.

Each package adds its own commands through ``register`` so that this module stays a table of
contents; heavy imports (torch, onnxruntime) happen inside the commands, never at start-up.
"""

from __future__ import annotations

import typer

from adaserve import commands
from adaserve.bench import cli as bench_cli
from adaserve.loadgen import cli as loadgen_cli
from adaserve.models import cli as models_cli
from adaserve.planner import cli as planner_cli
from adaserve.profiling import cli as profiling_cli
from adaserve.telemetry import cli as telemetry_cli
from adaserve.workers import cli as workers_cli

app = typer.Typer(
    name="adaserve",
    help="SLO-aware inference serving on Redis Streams.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)

for module in (commands, loadgen_cli, planner_cli, workers_cli, telemetry_cli, models_cli, profiling_cli, bench_cli):
    module.register(app)


def main() -> None:
    app()
