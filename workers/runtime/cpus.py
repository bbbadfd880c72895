"""How many CPUs this process may use: its affinity, capped by a cgroup CPU quota.

A container limited with ``cpus: 2`` (a CFS quota) still sees every host CPU in its affinity
mask, so ``os.sched_getaffinity`` alone sizes a thread pool for the host and the threads then
fight over two CPUs' worth of time. The quota is ``cpu.max`` on cgroup v2 (``"max 100000"`` or
``"<quota> <period>"``) and ``cpu.cfs_quota_us``/``cpu.cfs_period_us`` on cgroup v1.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")


def quota_cpus(root: Path = CGROUP) -> float | None:
    """The CPU quota in CPUs (1.5 for 150000/100000), or None when there is none or it is unreadable."""
    try:
        if (root / "cpu.max").exists():
            quota, period = (root / "cpu.max").read_text().split()[:2]
        else:
            quota = (root / "cpu" / "cpu.cfs_quota_us").read_text().strip()
            period = (root / "cpu" / "cpu.cfs_period_us").read_text().strip()
        if quota in ("max", "-1") or int(period) <= 0:
            return None
        return int(quota) / int(period)
    except (OSError, ValueError):
        return None


def available_cpus(root: Path = CGROUP) -> int:
    """CPUs for a thread pool: the affinity mask, at most the quota rounded up, at least 1."""
    n = len(os.sched_getaffinity(0))
    quota = quota_cpus(root)
    return max(1, min(n, math.ceil(quota)) if quota is not None else n)
