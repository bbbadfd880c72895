"""The HELIOS bench's measurements on disk: traces and costs saved once, replayed many times.

Measuring the candidates takes the host's time and its state (a shared host's costs move 10-50%
from run to run); a change to a decision is best judged on the *same* traces and costs before and
after, and on several such sets. ``save`` writes what ``helios_trace.trace`` and ``costs``
measured (one ``.npz`` of plain arrays and one ``.json``: no pickle), ``load`` reads it back;
``adaserve bench helios --save-measured DIR`` and ``--measured DIR`` use them.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from adaserve.bench.helios_trace import Costs, Trace

ARRAYS = ("exit_at_tau", "agree", "ppl")


def save(path: Path, traces: dict[str, Trace], costs: dict[str, Costs], tasks: list[str]) -> Path:
    """Write the traces and costs of one measurement under the directory ``path``."""
    path.mkdir(parents=True, exist_ok=True)
    np.savez(path / "traces.npz", **{f"{m}|{a}": getattr(t, a) for m, t in traces.items() for a in ARRAYS})
    meta = {"tasks": tasks, "exits": {m: list(t.exits) for m, t in traces.items()},
            "costs": {m: asdict(c) for m, c in costs.items()}}
    (path / "measured.json").write_text(json.dumps(meta))
    return path


def _int_keys(d: dict[str, Any]) -> dict[int, Any]:
    return {int(k): _int_keys(v) if isinstance(v, dict) else v for k, v in d.items()}


def load(path: Path) -> tuple[dict[str, Trace], dict[str, Costs], list[str]]:
    """Read back what ``save`` wrote: traces and costs by model, and the stream's task labels."""
    meta = json.loads((path / "measured.json").read_text())
    with np.load(path / "traces.npz") as arr:  # numpy refuses pickled (object) arrays by default
        traces = {m: Trace(m, tuple(ex), *(arr[f"{m}|{a}"] for a in ARRAYS)) for m, ex in meta["exits"].items()}
    costs = {}
    for m, c in meta["costs"].items():
        costs[m] = Costs(m, _int_keys(c["prefill_s"]), _int_keys(c["step_s"]), _int_keys(c["load_s"]),
                         _int_keys(c["weight_bytes"]), _int_keys(c["kv_bytes_per_token"]), int(c["block_size"]),
                         dict(c["early_exit_s"]), dict(c["early_exit_ttft_s"]))
    return traces, costs, list(meta["tasks"])
