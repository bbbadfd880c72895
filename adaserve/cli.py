"""The ``adaserve`` command: a thin typer app over library calls.

Each package adds its own commands through ``register`` so that this module stays a table of
contents; heavy imports (torch, onnxruntime) happen inside the commands, never at start-up.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperGroup

from adaserve import commands
from adaserve.bench import cli as bench_cli
from adaserve.broker import cli as broker_cli
from adaserve.broker.errors import AdaserveError
from adaserve.loadgen import cli as loadgen_cli
from adaserve.models import cli as models_cli
from adaserve.planner import cli as planner_cli
from adaserve.planner.helios import cli as helios_cli
from adaserve.process import cli_error
from adaserve.profiling import cli as profiling_cli
from adaserve.telemetry import cli as telemetry_cli
from adaserve.workers import cli as workers_cli


class _OneLineErrors(TyperGroup):
    """Whatever a user or operator can cause ends as one line on stderr, never a traceback.

    Commands catch the errors they expect and word them; this is the net under all of them
    (sub-groups included, since their commands run inside this group's ``invoke``): an
    ``AdaserveError`` or a server that cannot be reached, wherever it surfaces.
    """

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]  # typer hands its own Context
        import redis

        try:
            return super().invoke(ctx)
        except AdaserveError as exc:
            raise cli_error(exc) from None
        except redis.exceptions.NoPermissionError as exc:
            # A credential whose ACL user lacks this part's role (docs/security.md).
            raise cli_error(f"the server refused a command to this user: {exc}; connect with the user of "
                            "this part's role (`adaserve acl`)") from None
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            # A wrong or unreachable ADASERVE_REDIS_URL: a configuration error, exit code 2.
            raise cli_error(f"cannot reach the server (ADASERVE_REDIS_URL): {exc}") from None


app = typer.Typer(
    name="adaserve",
    help="SLO-aware inference serving on Redis Streams.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    cls=_OneLineErrors,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"adaserve {version('adaserve')}")
        raise typer.Exit()


@app.callback()
def _root(
    show_version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True,
                                      help="Print the version and exit."),
) -> None:
    """SLO-aware inference serving on Redis Streams."""

for module in (commands, loadgen_cli, planner_cli, workers_cli, telemetry_cli, models_cli, profiling_cli, bench_cli,
               broker_cli, helios_cli):
    module.register(app)


def main() -> None:
    app()
