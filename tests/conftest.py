"""Session fixtures: one real Redis-compatible server per test session, a fresh namespace per test.

``ADASERVE_TEST_REDIS_URL`` points the suite at an existing server instead (each test still gets
its own namespace, and its keys are deleted afterwards).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from adaserve.broker import Settings, connect, load_settings
from adaserve.embedded import EmbeddedServer


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = os.environ.get("ADASERVE_TEST_REDIS_URL")
    if url:
        yield url
        return
    server = EmbeddedServer(tmp_path_factory.mktemp("valkey"), persist=False).start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def settings(redis_url: str, tmp_path: Path) -> Settings:
    ns = "t" + uuid.uuid4().hex[:12]
    return load_settings(redis_url=redis_url, namespace=ns, data_dir=tmp_path / "data",
                         heartbeat_s=0.2, worker_ttl_s=1.5, reclaim_idle_ms=1000, block_ms=50)


@pytest.fixture
def r(settings: Settings) -> Iterator["redis.Redis[bytes]"]:
    client = connect(settings)
    yield client
    pattern = "{" + settings.namespace + "}:*"
    keys = list(client.scan_iter(match=pattern, count=1000))
    if keys:
        client.delete(*keys)
    client.close()
