"""What server we talk to and which optional features it has."""

from __future__ import annotations

from dataclasses import dataclass

import redis

from adaserve.broker.errors import ServerUnsupported


@dataclass(frozen=True)
class ServerInfo:
    name: str
    version: tuple[int, int, int]
    xautoclaim: bool
    xinfo_lag: bool
    xadd_minid: bool
    lua: bool

    @property
    def version_str(self) -> str:
        return ".".join(map(str, self.version))


def _parse(v: str) -> tuple[int, int, int]:
    parts = [*v.split("."), "0", "0", "0"][:3]
    return tuple(int("".join(ch for ch in p if ch.isdigit()) or 0) for p in parts)  # type: ignore[return-value]


def probe(r: redis.Redis[bytes]) -> ServerInfo:
    """Version and capabilities; raises ``ServerUnsupported`` below the Streams core we need."""
    info = r.info("server")
    if "valkey_version" in info:
        name, raw = "valkey", str(info["valkey_version"])
    else:
        name, raw = "redis", str(info.get("redis_version", "0"))
    ver = _parse(raw)
    # Valkey 7.2+ reports redis_version 7.2.4 for compatibility; its own number is newer.
    compat = _parse(str(info.get("redis_version", raw)))
    base = max(ver, compat) if name == "valkey" else ver
    si = ServerInfo(
        name=name,
        version=ver,
        xautoclaim=base >= (6, 2, 0),
        xinfo_lag=base >= (7, 0, 0),
        xadd_minid=base >= (6, 2, 0),
        lua=True,
    )
    if not si.xautoclaim:
        raise ServerUnsupported(f"{name} {raw} lacks XAUTOCLAIM; adaserve needs Redis >= 6.2 or Valkey")
    return si
