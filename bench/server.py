"""The server a benchmark talks to: ``ADASERVE_REDIS_URL`` when set, else a fresh embedded one."""

from __future__ import annotations

import contextlib
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from adaserve.broker import Settings, load_settings
from adaserve.embedded import EmbeddedServer


@contextlib.contextmanager
def bench_settings(**overrides: object) -> Iterator[Settings]:
    """Settings with a scratch namespace on the configured server or an embedded one."""
    base = load_settings()
    ns = "bench" + uuid.uuid4().hex[:8]
    if base.redis_url:
        yield load_settings(**{**overrides, "namespace": ns})
        return
    with tempfile.TemporaryDirectory(prefix="adaserve-bench-") as tmp, \
            EmbeddedServer(Path(tmp) / "server", persist=False) as server:
        yield load_settings(**{**overrides, "redis_url": server.local_url, "namespace": ns})
