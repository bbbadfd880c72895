"""``adaserve placement``: HEFT's performance histories, as a planner last published them or as a
profile would seed them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer


def placement(
    profile: Path | None = typer.Option(None, help="Show the histories this `bench gpu --json` report seeds "
                                                   "instead of what the planners published."),
    model: str = typer.Option("", help="Only this model."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Performance histories (per model, part, device kind, batch size), arrival rates and batch sizes."""
    from adaserve.planner.heft.history import Histories

    states: dict[str, dict[str, Any]] = {}
    if profile is not None:
        from adaserve.planner.heft.seed import seed_file

        h = Histories()
        seed_file(h, profile)
        states["profile"] = {"histories": h.snapshot(), "rates": {}, "batch_sizes": {}, "handover": {}}
    else:
        from adaserve.broker import Keys, load_settings
        from adaserve.broker.codec import unpack
        from adaserve.broker.connection import connect

        settings = load_settings()
        r = connect(settings)
        try:
            for name, raw in r.hgetall(Keys(settings.namespace).placement).items():
                states[name.decode() if isinstance(name, bytes) else str(name)] = unpack(raw)
        finally:
            r.close()
    for st in states.values():
        st["histories"] = [h for h in st.get("histories", []) if not model or h.get("model") == model]
    if as_json:
        print(json.dumps({"planners": states}, default=str))
        return
    _print(states)


def _print(states: dict[str, dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not states:
        console.print("no planner has published placement state (run `adaserve planner --placement heft`)")
        return
    for name, st in states.items():
        t = Table(title=f"histories: {name}")
        for col in ("model", "part", "kind", "batch", "mean ms", "std ms", "n", "state"):
            t.add_column(col)
        for h in st.get("histories", []):
            state = "trusted" if h.get("trusted") else "seed" if h.get("seeded") else "exploring"
            t.add_row(str(h["model"]), str(h["part"]), str(h["kind"]), str(h["batch"]), f"{h['mean_ms']:.3f}",
                      f"{h['std_ms']:.3f}", str(h["n"]), state)
        console.print(t)
        for m, rate in st.get("rates", {}).items():
            console.print(f"{m}: {rate:.1f} requests/s, batch size {st.get('batch_sizes', {}).get(m, '-')}")
        for m, ho in st.get("handover", {}).items():
            console.print(f"{m}: hand-over {ho['fixed_ms']:.3f} ms + {ho['per_request_ms']:.4f} ms per request "
                          f"({int(ho['measured'])} measured)")


def register(app: typer.Typer) -> None:
    app.command("placement")(placement)
