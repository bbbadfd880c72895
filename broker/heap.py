"""How much freed memory a process keeps for its next message instead of handing it back.

A job of eight photos is 4.8 MB, and each process on its path holds it in several buffers at
once (the reply read off the socket, the unpacked tensors, the batch packed for the worker). With
glibc's defaults, freeing those buffers returns the memory to the kernel (an ``munmap``, or a trim
of the heap's top once more than twice the last freed block is free there), and the next job's
buffers fault every page back in, zeroed by the kernel: about 1,200 page faults a job per buffer.
In ``adaserve bench overhead --model effnet-lite0`` that was most of the planner's and the SDK's CPU
an image (docs/overhead.md, twenty-first round). Keeping freed memory for reuse costs at most
``keep_mb`` of resident memory per heap and nothing per message.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable
from functools import cache

__all__ = ["MAX_KEEP_MB", "MMAP_CEILING_MB", "keep_freed_memory"]

# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# glibc refuses an mmap threshold above half its largest heap (32 MiB on 64-bit builds)
MMAP_CEILING_MB = 32
MAX_KEEP_MB = 2047  # mallopt takes a C int of bytes
# A process started with its own malloc tuning keeps it
_OWN_TUNING = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_")


def keep_freed_memory(keep_mb: int) -> bool:
    """Serve blocks under ``min(keep_mb, 32)`` MiB from the heap and leave up to ``keep_mb`` MiB
    freed at its top, for this whole process; returns whether the C library took it.

    ``0`` changes nothing; so does a process whose environment already tunes malloc
    (``MALLOC_*_`` variables, ``GLIBC_TUNABLES`` naming ``glibc.malloc``), and a C library other
    than glibc (musl, macOS), where this returns False.
    """
    if not 0 <= keep_mb <= MAX_KEEP_MB:
        raise ValueError(f"keep_mb must be 0-{MAX_KEEP_MB}, not {keep_mb}")
    if keep_mb == 0 or not sys.platform.startswith("linux"):
        return False
    if any(v in os.environ for v in _OWN_TUNING) or "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", ""):
        return False
    mallopt = _mallopt()
    if mallopt is None:
        return False
    size = keep_mb << 20
    # the trim threshold first: each call also stops glibc moving both thresholds by itself
    return bool(mallopt(_M_TRIM_THRESHOLD, size)) and bool(
        mallopt(_M_MMAP_THRESHOLD, min(keep_mb, MMAP_CEILING_MB) << 20))


@cache  # the SDK calls this with each Client it builds
def _mallopt() -> Callable[[int, int], int] | None:
    """glibc's ``mallopt``, or None under another C library."""
    try:
        glibc = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError):  # a C library that does not know the name
        glibc = None
    if not glibc:
        return None
    fn = ctypes.CDLL(None).mallopt  # the C library this interpreter runs on
    fn.argtypes = (ctypes.c_int, ctypes.c_int)
    fn.restype = ctypes.c_int
    return fn
