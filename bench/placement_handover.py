"""The measured cost of handing a tensor from one pool to the next through Redis: encode the
batch map, XADD it, read it back as the next pool's worker does, decode it. Fitted as
``fixed + per_byte * bytes`` (medians per size, least squares over sizes)."""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np

from adaserve.planner.heft import Transfer


def measure(settings: Any, per_request_bytes: int, sizes: tuple[int, ...] = (1, 4, 16, 32),
            repeats: int = 15) -> dict[str, Any]:
    """Median seconds per batch size and the fitted line, on ``settings``' server."""
    from adaserve.broker import streams
    from adaserve.broker.codec import encode_map, unpack
    from adaserve.broker.connection import connect

    r = connect(settings)
    key = f"{{{settings.namespace}}}:handover-bench"
    row = np.random.default_rng(0).integers(0, 255, per_request_bytes, dtype=np.uint8).tobytes()
    medians: dict[int, float] = {}
    try:
        for n in sizes:
            runs = []
            for _ in range(repeats + 2):
                t0 = time.perf_counter()
                raw = encode_map({"v": 1, "type": "batch", "items": [
                    {"inputs": {"intermediate": {"dtype": "float32", "shape": [per_request_bytes // 4], "data": row}}}
                    for _ in range(n)]})
                r.xadd(key, {b"m": raw}, maxlen=4)
                got = streams.read(r, {key: "0-0"}, count=1)
                unpack(got[-1].raw or b"")
                runs.append(time.perf_counter() - t0)
                r.delete(key)
            medians[n] = statistics.median(runs[2:])
    finally:
        r.delete(key)
        r.close()
    fit = Transfer()
    for n, s in medians.items():
        fit.observe(n * per_request_bytes, s)
    return {"per_request_bytes": per_request_bytes, "median_ms": {str(n): s * 1000 for n, s in medians.items()},
            "fixed_ms": fit.fixed_s * 1000, "per_mb_ms": fit.per_byte_s * 1e9, "repeats": repeats}
