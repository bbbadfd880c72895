"""``keep_freed_memory``: a process that handles messages of megabytes stops faulting their pages in
again. Each case runs in a fresh interpreter, since the setting is for a whole process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from adaserve.broker import ConfigError, load_settings
from adaserve.broker.heap import keep_freed_memory

glibc = pytest.mark.skipif(not sys.platform.startswith("linux") or not hasattr(os, "confstr")
                           or not os.confstr("CS_GNU_LIBC_VERSION"), reason="glibc's mallopt")

# Three buffers of 5 MiB alive at once and freed together, as a 4.8 MB job's reply, its unpacked
# tensors and its batch are: minor page faults per round, after three rounds of warm-up.
_ROUNDS = """
import resource
def rounds(n):
    for _ in range(n):
        bufs = [bytearray(5 << 20) for _ in range(3)]
        for b in bufs:
            b[::4096] = b"\\1" * len(range(0, len(b), 4096))
rounds(3)
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
rounds(20)
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / 20)
"""


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES" and not k.startswith("ADASERVE_")}
    return {**env, **extra}


def _faults(prelude: str, **env: str) -> tuple[str, float]:
    out = subprocess.run([sys.executable, "-c", prelude + _ROUNDS], env=_clean_env(**env),
                         capture_output=True, text=True, timeout=120, check=True).stdout.split()
    return " ".join(out[:-1]), float(out[-1])


@glibc
def test_freed_buffers_of_megabytes_are_reused_without_faulting_their_pages_in_again() -> None:
    keep = "from adaserve.broker.heap import keep_freed_memory\nprint(keep_freed_memory({}))\n"
    said, kept = _faults(keep.format(64))
    _, default = _faults(keep.format(0))
    assert said == "True"
    # each round touches 3,840 pages; by default most of them fault in again every round
    assert default > 1000 and kept < 50


@glibc
def test_a_process_that_tunes_malloc_itself_keeps_its_own_tuning() -> None:
    code = "from adaserve.broker.heap import keep_freed_memory\nprint(keep_freed_memory(64))\n"
    said, faults = _faults(code, MALLOC_TRIM_THRESHOLD_="0")  # trim everything: its choice
    assert said == "False" and faults > 1000
    said, _ = _faults(code, GLIBC_TUNABLES="glibc.malloc.trim_threshold=0")
    assert said == "False"


@glibc
def test_the_sdk_client_keeps_freed_memory_as_the_setting_says(redis_url: str) -> None:
    code = ("from adaserve.broker import load_settings\nfrom adaserve.producers import Client\n"
            f"c = Client(load_settings(redis_url={redis_url!r}))\nc.close()\n")
    _, kept = _faults(code)
    _, default = _faults(code, ADASERVE_HEAP_KEEP_MB="0")
    assert kept < 50 and default > 1000


def test_zero_changes_nothing_and_a_size_out_of_range_is_refused() -> None:
    assert keep_freed_memory(0) is False
    for bad in (-1, 4096):
        with pytest.raises(ValueError, match="keep_mb must be 0-2047"):
            keep_freed_memory(bad)
    for bad in (-1, 2048):
        with pytest.raises(ConfigError):
            load_settings(heap_keep_mb=bad)
