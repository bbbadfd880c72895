"""``adaserve helios pht``: the Performance History Table the live planner keeps per family."""

from __future__ import annotations

import json
from typing import Any

import typer

helios_app = typer.Typer(help="HELIOS: run-time model and exit-depth choice for a task family.", no_args_is_help=True)

_COLUMNS = ("model", "depth", "prompts", "tokens", "breach_share", "tokens_per_s", "ttft_s", "perplexity",
            "mean_batch", "load_s")


@helios_app.command("pht")
def pht(
    family: str | None = typer.Argument(None, help="The family (a job's model); default: every family."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object per family."),
) -> None:
    """Show each family's phase, current model and depth, and its PHT rows."""
    from rich.console import Console
    from rich.table import Table

    from adaserve.broker.connection import connect
    from adaserve.broker.keys import Keys
    from adaserve.broker.settings import load_connected_settings
    from adaserve.planner.helios.store import read_tables

    settings = load_connected_settings()
    tables = read_tables(connect(settings), Keys(settings.namespace), family)
    if not tables:
        raise typer.BadParameter(f"no HELIOS state stored for {family!r}" if family else
                                 "no HELIOS state stored: no job has named a family yet", param_hint="family")
    console = Console(highlight=False)
    for t in tables:
        if json_out:
            typer.echo(json.dumps(t, separators=(",", ":")))
            continue
        console.print(_title(t))
        table = Table(*_COLUMNS, "exits (0: breach)")
        for row in t.get("rows", []):
            table.add_row(*(_cell(row.get(c)) for c in _COLUMNS), _cell(row.get("exits")))
        console.print(table)


def _title(t: dict[str, Any]) -> str:
    return (f"family {t.get('family')} (objective {t.get('objective')}): {t.get('phase')} on "
            f"{t.get('model')} at depth {t.get('depth')}; shortlist {', '.join(t.get('shortlist', []))} "
            f"(accuracy reference {t.get('reference')}); "
            f"counts {t.get('counts')}")


def _cell(v: object) -> str:
    return "-" if v is None else str(v)


def register(app: typer.Typer) -> None:
    app.add_typer(helios_app, name="helios")
