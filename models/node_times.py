"""Per-node times from onnxruntime's profiler, summed per unit of a ``Chain`` export (measured by
``adaserve.profiling.nodes``; this module holds what the build needs: the trace's sums, the stored
document, the rule's cut on it).

onnxruntime writes one trace event per node run (``cat == "Node"``, ``name`` = the node name +
``_kernel_time``, ``dur`` in µs). Nodes that onnxruntime adds itself (layout reorders, fused
nodes renamed) carry no ``/units.<i>/`` prefix; they are charged to the unit that ran just before
them in that run, since that is what they serve. Each unit's time is the median over the timed runs.

The result is stored as ``node_times.json`` beside a model's manifest: the device it was measured
on, the batch size, the per-unit times and crossing sizes, and the cut the split rule chose.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from adaserve.models.split_point import BAND, choose_split

NODE_TIMES = "node_times.json"
_UNIT = re.compile(r"/units\.(\d+)/")


def unit_of(node: str) -> int | None:
    m = _UNIT.search(node)
    return int(m.group(1)) if m else None


def unit_times_from_trace(events: list[dict[str, Any]], units: int) -> list[list[float]]:
    """Per run (split where unit indices go back to the start), µs per unit."""
    runs: list[list[float]] = []
    current: list[float] | None = None
    last: int | None = None
    for ev in events:
        if ev.get("cat") != "Node" or not str(ev.get("name", "")).endswith("_kernel_time"):
            continue
        u = unit_of(str(ev["name"]))
        if u is not None and (current is None or (last is not None and u < last)):
            current = [0.0] * units
            runs.append(current)
        if current is None:
            continue  # nodes before the first unit's first node: none in a Chain export
        u = last if u is None else u
        if u is None or u >= units:
            continue
        current[u] += float(ev.get("dur", 0.0))
        last = u
    return runs


def record(model: str, unit_names: list[str], profile: dict[str, Any], crossing: list[int | None],
           batch: int, device: str) -> dict[str, Any]:
    """The ``node_times.json`` document, with the rule's choice on these times."""
    choice = choose_split(profile["units_us"], crossing)
    return {
        "model": model, "device": device, "provider": profile["provider"], "batch": batch,
        "runs": profile["runs"], "onnxruntime": profile["onnxruntime"], "band": list(BAND),
        "units": [{"name": n, "us": round(t, 1), "crossing_bytes": c}
                  for n, t, c in zip(unit_names, profile["units_us"], crossing)],
        "split": {"cut": choice.cut, "after": unit_names[choice.cut - 1],
                  "tail_share": round(choice.tail_share, 4), "crossing_bytes": choice.crossing_bytes,
                  "in_band": choice.in_band},
    }


def read(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(Path(path).read_text())
    return doc


def choice_of(doc: dict[str, Any]) -> int:
    """The cut the rule picks on a stored document's times (recomputed, not read back)."""
    return choose_split([u["us"] for u in doc["units"]], [u["crossing_bytes"] for u in doc["units"]],
                        tuple(doc.get("band", BAND))).cut


# Where each splittable model's recorded times live (read by its build, rewritten by
# `adaserve profile nodes --record`) and the function that gives its chain.
SOURCES: dict[str, tuple[str, str]] = {
    "effnet-lite0": ("adaserve.models.effnet", "adaserve.models.effnet.export:chain"),
    "ee-lm-s-split": ("adaserve.models.lm", "adaserve.models.lm.split:chain"),
}


def source_path(model: str) -> Path:
    from importlib import resources

    if model not in SOURCES:
        raise KeyError(f"{model!r} has no recorded node times (splittable: {', '.join(SOURCES)})")
    return Path(str(resources.files(SOURCES[model][0]).joinpath(NODE_TIMES)))


def shipped(model: str) -> dict[str, Any]:
    return read(source_path(model))


def chain_of(model: str) -> Any:
    """``(chain, unit names, feed(batch) -> numpy input, input name, output name)`` of ``model``."""
    import importlib

    module, attr = SOURCES[model][1].split(":")
    return getattr(importlib.import_module(module), attr)()
