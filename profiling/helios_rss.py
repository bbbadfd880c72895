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
    """Current resident set size (Linux ``/proc/self/statm``: the measurement is Linux-only)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


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
    reset_peak()  # the corpus encoding above peaked higher than anything measured here
    runner.run({"tokens": tokens, "max_new_tokens": np.full(batch, 16)})
    return {"base": base, "loaded": loaded, "after_batch": max(peak_rss_bytes(), loaded)}


def reset_peak() -> None:
    """Reset the kernel's resident high-water mark (Linux >= 4.0, ``clear_refs`` 5)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def peak_rss_bytes() -> int:
    """The resident high-water mark since ``reset_peak`` (``VmHWM``)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise OSError("no VmHWM in /proc/self/status")


if __name__ == "__main__":
    print(json.dumps(measure(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))))
