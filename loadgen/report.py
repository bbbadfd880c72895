"""A load run's summary as a rich table (``adaserve produce`` without ``--json``)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from adaserve.loadgen.summary import LoadSummary


def _fmt(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, dict):
        return ", ".join(f"{k}={n}" for k, n in sorted(v.items())) or "-"
    return str(v)


def print_summary(summary: LoadSummary, console: Console | None = None) -> None:
    table = Table(title=f"run {summary.run}: {summary.model}, {summary.pattern}", show_header=False, min_width=56)
    table.add_column("figure", style="bold")
    table.add_column("value", justify="right")
    for name, value in summary.model_dump().items():
        if name not in ("run", "model", "pattern"):
            table.add_row(name, _fmt(value))
    (console or Console()).print(table)
