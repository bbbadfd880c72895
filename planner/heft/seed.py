"""Histories seeded from offline profiles: ``adaserve bench gpu --json`` reports (as
``docs/gpu-h100.json``), whose rows time each model, variant and batch size on the CPU and on the
GPU of one host. Only whole models and split parts are taken (``whole``/``default`` and
``part1``/``part2``); early exits and modality subsets are other decisions' variants.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from adaserve.broker.errors import ConfigError
from adaserve.planner.heft.history import WHOLE, Histories, Key

_PARTS = {"whole": WHOLE, "default": WHOLE, "part1": "part1", "part2": "part2"}
_COLUMNS = {"cpu_p50_ms": "cpu", "gpu_p50_ms": "gpu"}


def profile_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a ``bench gpu`` JSON report; ``ConfigError`` naming what is wrong."""
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the profile {path}: {exc}") from None
    rows = report.get("rows") if isinstance(report, dict) else None
    if not isinstance(rows, list):
        raise ConfigError(f"{path} has no 'rows' list (a `bench gpu --json` report is expected)")
    return [r for r in rows if isinstance(r, dict)]


def seed_rows(h: Histories, rows: Iterable[Mapping[str, Any]], models: Iterable[str] | None = None) -> int:
    """Seed ``h`` from profile rows; how many (key, size) figures were taken."""
    keep = set(models) if models is not None else None
    n = 0
    for r in rows:
        part = _PARTS.get(str(r.get("variant")))
        model, size = r.get("model"), r.get("batch")
        if part is None or not isinstance(model, str) or not isinstance(size, int) or (keep is not None and model not in keep):
            continue
        if part == WHOLE and r.get("kind") not in ("whole", None) and r.get("variant") != "whole":
            continue
        for column, kind in _COLUMNS.items():
            ms = r.get(column)
            if isinstance(ms, int | float) and ms >= 0:
                h.seed(Key(model, part, kind), size, ms / 1000.0)
                n += 1
    return n


def seed_file(h: Histories, path: Path, models: Iterable[str] | None = None) -> int:
    return seed_rows(h, profile_rows(path), models)
