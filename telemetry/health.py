"""``adaserve health``: whether a planner or worker of this host reported lately (a healthcheck).

Planners and workers name themselves after their host (``planner-<host>-<pid>``,
``<pool>-<host>-<pid>-<random>``), so inside a container, whose host name is its own, "a process of
this host" is the container's process. The reports are the hashes ``telemetry.scrape`` reads.
"""

from __future__ import annotations

import re
import socket

import redis

from adaserve.broker.settings import Settings
from adaserve.telemetry.scrape import read_live


def host_names() -> tuple[str, ...]:
    """This host as planner names carry it, and as worker names carry it (cleaned)."""
    host = socket.gethostname()
    return tuple(dict.fromkeys((host, re.sub(r"[^A-Za-z0-9_.\-]", "-", host)[:40] or "host")))


def check(r: redis.Redis[bytes], settings: Settings, kind: str, name: str | None = None) -> tuple[bool, str]:
    """(healthy, one line saying why) for ``kind`` planner or worker; ``name``: a name or its start."""
    live = read_live(r, settings)
    reports = {p.planner: p.ts for p in live.planners} if kind == "planner" else {w.worker: w.ts for w in live.workers}
    hosts = host_names()

    def mine(n: str) -> bool:
        return n.startswith(name) if name else any(f"-{h}-" in n for h in hosts)

    found = sorted((live.now_ms - ts, n) for n, ts in reports.items() if mine(n))
    if found:
        age, who = found[0]
        return True, f"ok: {kind} {who} reported {max(age, 0.0) / 1000.0:.1f}s ago"
    which = f"named {name}*" if name else f"of host {hosts[0]}"
    return False, f"unhealthy: no {kind} {which} reported in the last {settings.worker_ttl_s:g}s"
