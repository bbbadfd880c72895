"""`bench/cpu.py`: a process's counters read from /proc."""

import os

from adaserve.bench.cpu import memory_mb


def test_memory_is_resident_now_and_at_peak_and_none_for_a_gone_process() -> None:
    got = memory_mb(os.getpid())
    assert got is not None
    rss, peak = got
    assert 0 < rss <= peak
    block = bytearray(64 * 1024 * 1024)  # zero-filled pages are only resident once written
    block[::4096] = b"x" * len(block[::4096])
    after = memory_mb(os.getpid())
    assert after is not None and after[0] >= rss + 60 and after[1] >= after[0]
    del block
    assert memory_mb(2**22 + 12345) is None  # above Linux's pid_max: never a process
