"""What became of each app's requests in a run of `adaserve bench apps`, and how batches mixed the apps.

A finish rate says how many requests of an app were lost, not why. A language model runs a batch
for its longest generation, so whether a short app's requests shared batches with a long app's
says much of where they went; and whether the rest ended late or expired says whether the
planner sent what could not make it or held back what could.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from adaserve.broker.settings import Settings

__all__ = ["batch_mix", "events_since", "explain", "lost", "summed"]


def lost(summary: dict[str, Any]) -> dict[str, int]:
    """What an app's producer summary (``adaserve produce --json``) says became of its requests
    that did not finish in time: completed late, expired (at the planner or unrun at the worker),
    refused (``rejected``), or never answered."""
    submitted = int(summary["submitted"])
    met = round(summary["finish_rate"] * submitted)
    return {"submitted": submitted, "late": int(summary["completed"]) - met, "expired": int(summary["expired"]),
            "rejected": int(summary["rejected"]), "unfinished": int(summary["unfinished"])}


def batch_mix(events: Iterable[Any], runs: Mapping[str, str], deadlines: Mapping[str, float]) -> dict[str, Any]:
    """How the worker's batches mixed the apps: ``runs`` maps each app's run tag to the app,
    ``deadlines`` each app to its deadline (ms). A language model runs a batch for its longest
    generation, so a short app's request in a batch with a long app's runs at the long one's pace.
    Per app: the requests that ran, how many ran beside another app's, and how many of those
    finished in time; and the batches, and how many mixed apps."""
    per = {app: {"ran": 0, "mixed": 0, "mixed_in_time": 0} for app in deadlines}
    batches = mixed = 0
    for ev in events:
        if getattr(ev, "event", None) != "batch.finished":
            continue
        items = [(runs[i.run], i) for i in ev.ran_items() if i.run in runs]
        if not items:
            continue
        batches += 1
        together = len({app for app, _ in items}) > 1
        mixed += together
        for app, i in items:
            got = per[app]
            got["ran"] += 1
            if together:
                got["mixed"] += 1
                got["mixed_in_time"] += i.total_ms <= deadlines[app]
    return {"batches": batches, "mixed_batches": mixed, "apps": per}


def events_since(settings: Settings, since_ms: int) -> list[Any]:
    """The ``batch.finished`` events since ``since_ms`` (server ms)."""
    from adaserve.broker import connect
    from adaserve.telemetry import EventFilter, TelemetryReader

    r = connect(settings)
    try:
        reader = TelemetryReader(r, settings)
        return [x.event for x in reader.history(since_ms=since_ms, keep=EventFilter(types=("batch.finished",)))]
    finally:
        r.close()


def summed(counts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """Counts added key by key (a cell's runs)."""
    out: dict[str, int] = {}
    for c in counts:
        for k, v in c.items():
            out[k] = out.get(k, 0) + v
    return out


def explain(cell: Mapping[str, Any]) -> list[str]:
    """One line per app of what became of its requests in a cell, for the terminal."""
    lines: list[str] = []
    for n, c in cell.get("lost", {}).items():
        sub = max(c["submitted"], 1)
        m = cell["mix"]["apps"][n]
        mixed = (f"; {m['mixed'] / max(m['ran'], 1):.0%} of those that ran shared a batch with another app, "
                 f"{m['mixed_in_time'] / m['mixed']:.0%} of them in time" if m["mixed"] else "")
        lines.append(f"{n}: {c['late'] / sub:.0%} late, {c['expired'] / sub:.0%} expired, "
                     f"{c['rejected'] / sub:.0%} refused{mixed}")
    return lines
