"""CPU seconds of the pipeline's processes, from their own counters, and Redis commands served.

A process's CPU time is what the kernel charged it (``/proc/<pid>/stat``: user + system, every
thread), read before and after a measured stretch; the difference divided by the requests
completed in it is that process's cost per request. The server's own figures come from
``INFO server`` (its pid) and ``INFO commandstats`` (calls per command).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float:
    """User + system CPU of ``pid`` so far; this process is read exactly, others to a clock tick."""
    if pid == os.getpid():
        return time.process_time()
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime (fields 14, 15 of stat(5))


def memory_mb(pid: int) -> tuple[float, float] | None:
    """Resident memory of ``pid`` now and at its peak (``VmRSS``, ``VmHWM``), in MiB; None for a
    process gone or not readable. A process that keeps what it served grows with the run: its
    peak shows it where CPU figures do not."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    kb = {k: int(v.split()[0]) for k, _, v in (line.partition(":") for line in text.splitlines())
          if k in ("VmRSS", "VmHWM")}
    if len(kb) < 2:
        return None
    return kb["VmRSS"] / 1024, kb["VmHWM"] / 1024


def redis_calls_by_command(r: Any) -> dict[str, int]:
    """Commands the server has executed so far (all clients, ``INFO commandstats``), by name
    (``cmdstat_xadd`` -> ``xadd``; scripts as ``evalsha``)."""
    stats: Mapping[str, Any] = r.info("commandstats")
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items() if isinstance(v, Mapping)}


@dataclass
class CpuMeter:
    """Per-process CPU over the stretches between ``start`` and ``stop``, summed over stretches."""

    pids: dict[str, int]
    redis: Any
    spent: dict[str, float] | None = None
    by_command: dict[str, int] = field(default_factory=dict)
    _t0: dict[str, float] | None = None
    _c0: dict[str, int] = field(default_factory=dict)

    def start(self) -> None:
        self._t0 = {name: cpu_seconds(pid) for name, pid in self.pids.items()}
        self._c0 = redis_calls_by_command(self.redis)

    def stop(self) -> None:
        if self._t0 is None:
            raise RuntimeError("CpuMeter.stop before start")
        c1 = redis_calls_by_command(self.redis)
        t1 = {name: cpu_seconds(pid) for name, pid in self.pids.items()}
        spent = self.spent or dict.fromkeys(self.pids, 0.0)
        for name in self.pids:
            spent[name] += t1[name] - self._t0[name]
        self.spent = spent
        c1["info"] = c1.get("info", 0) - 1  # the INFO that read the start counter is counted in c1
        for name, n in c1.items():
            if n - self._c0.get(name, 0) > 0:
                self.by_command[name] = self.by_command.get(name, 0) + n - self._c0.get(name, 0)
        self._t0 = None

    @property
    def calls(self) -> int:
        """Commands the server executed over the stretches, all names."""
        return sum(self.by_command.values())

    def memory(self) -> dict[str, dict[str, float]]:
        """Each readable process's resident MiB now and at its peak."""
        out = {}
        for name, pid in self.pids.items():
            got = memory_mb(pid)
            if got is not None:
                out[name] = {"rss_mb": round(got[0], 1), "peak_rss_mb": round(got[1], 1)}
        return out

    def per_request_us(self, requests: int) -> dict[str, float]:
        if not self.spent or requests <= 0:
            return {}
        return {name: s / requests * 1e6 for name, s in self.spent.items()}
