"""``adaserve profile nodes``: per-unit times of a splittable model from onnxruntime's profiler,
and the cut the split rule (``adaserve.models.split_point``) picks on them.

The model's chain (``adaserve.models.chain``) is exported to ONNX and run with
``SessionOptions.enable_profiling`` on the device asked for, with the serving session's options
otherwise; each run's node times are summed per unit (``models.node_times``) and the median per
unit over the runs is kept. ``--record`` rewrites the times the model's build reads.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from adaserve.models.node_times import unit_times_from_trace


def profile_units(onnx_path: Path, feed: dict[str, np.ndarray], units: int, *, runs: int = 20,
                  warmup: int = 3, device: str = "cpu", threads: int | None = None) -> dict[str, Any]:
    """Median µs per unit over ``runs`` profiled runs (after ``warmup`` unprofiled ones)."""
    import onnxruntime as ort

    from adaserve.workers.runtime.base import choose_providers
    from adaserve.workers.runtime.onnx import default_threads

    # The serving session's options (workers/runtime/onnx.make_session), plus the profiler.
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.intra_op_num_threads = threads or default_threads()
    opts.inter_op_num_threads = 1
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.enable_profiling = True
    with tempfile.TemporaryDirectory() as tmp:
        opts.profile_file_prefix = os.path.join(tmp, "prof")
        sess = ort.InferenceSession(str(onnx_path), opts, providers=choose_providers(device))
        for _ in range(warmup + runs):
            sess.run(None, feed)
        trace = Path(sess.end_profiling())
        events = json.loads(trace.read_text())
    per_run = unit_times_from_trace(events, units)[-runs:]
    if not per_run:
        raise RuntimeError(f"the profiler of {onnx_path} recorded no /units.<i>/ nodes")
    medians = [statistics.median(r[u] for r in per_run) for u in range(units)]
    return {"units_us": medians, "runs": len(per_run), "provider": sess.get_providers()[0],
            "onnxruntime": ort.__version__}


def nodes(
    name: Annotated[str, typer.Argument(help="A splittable model (effnet-lite0, ee-lm-s-split).")],
    batch: Annotated[int, typer.Option(min=1, max=256, help="Batch size of the profiled runs.")] = 8,
    runs: Annotated[int, typer.Option(min=1, max=1000, help="Profiled runs (the median per unit is kept).")] = 20,
    device: Annotated[str, typer.Option(help="cpu or gpu (onnxruntime's CUDA provider).")] = "cpu",
    record: Annotated[bool, typer.Option("--record", help="Overwrite the times the build reads (in the source tree).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the node_times.json document.")] = False,
) -> None:
    """Per-unit times from onnxruntime's profiler and the cut the split rule picks on them."""
    from adaserve.models.chain import crossing_bytes, export
    from adaserve.models.node_times import SOURCES, chain_of, source_path
    from adaserve.models.node_times import record as make_record

    if name not in SOURCES:
        raise typer.BadParameter(f"{name!r} is not splittable (splittable: {', '.join(SOURCES)})", param_hint="NAME")
    if device not in ("cpu", "gpu"):
        raise typer.BadParameter("cpu or gpu", param_hint="--device")
    import torch

    net, names, feed, in_name, out_name = chain_of(name)
    x = feed(batch)
    crossing = crossing_bytes(net, torch.from_numpy(x[:2]))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "units.onnx"
        export(net, torch.from_numpy(x[:2]), path, in_name, out_name)
        prof = profile_units(path, {in_name: x}, len(names), runs=runs, device=device)
    doc = make_record(name, names, prof, crossing, batch, device)
    if record:
        source_path(name).write_text(json.dumps(doc, indent=1) + "\n")
    if as_json:
        typer.echo(json.dumps(doc))
        return
    s = doc["split"]
    typer.echo(f"{name} on {doc['provider']} (batch {batch}, {doc['runs']} runs): cut after {s['after']} "
               f"(part 2 = {s['tail_share']:.1%} of the time, {s['crossing_bytes']} bytes per sample cross, "
               f"{'in' if s['in_band'] else 'outside'} the 5-15 % band)")
