"""Resident memory of one depth, measured in a fresh process: ``python -m adaserve.profiling.helios_rss
MODEL_DIR DEPTH BATCH`` prints JSON with the RSS before loading, after loading and after running a
batch (prompts of 32 tokens, 16 generated; the peak, so the KV cache and activations count even
if freed). A fresh process, because in one that has loaded other
depths the allocator reuses freed memory and the growth says nothing."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def rss_bytes() -> int:
    """Current resident set size (Linux ``/proc/self/statm``; elsewhere the peak from getrusage)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def measure(model_dir: Path, depth: int, batch: int) -> dict[str, int]:
    import numpy as np
    import torch

    from adaserve.models.lm.prompts import sample_prompts
    from adaserve.models.manifest import read_manifest
    from adaserve.workers.runtime.lm import LmRunner

    torch.set_num_threads(1)
    info = read_manifest(model_dir)
    variant = info.variant(f"depth{depth}")
    tokens, _ = sample_prompts(batch, 32, seed=0)
    # One-off costs (imports, the allocator's first arenas, torch's lazy setup) are paid by a
    # warm-up runner of the shallowest depth on one short prompt, kept alive, before measuring.
    warm = LmRunner(model_dir, info, info.variants[0], "cpu", threads=1)
    warm.run({"tokens": tokens[:1, -4:], "max_new_tokens": np.array([2])})
    base = rss_bytes()
    runner = LmRunner(model_dir, info, variant, "cpu", threads=1)
    loaded = rss_bytes()
    runner.run({"tokens": tokens, "max_new_tokens": np.full(batch, 16)})
    return {"base": base, "loaded": loaded, "after_batch": max(peak_rss_bytes(), loaded)}


def peak_rss_bytes() -> int:
    """The process's peak resident set so far (Linux reports KiB)."""
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


if __name__ == "__main__":
    print(json.dumps(measure(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))))
