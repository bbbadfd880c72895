"""What of a server URL may be shown."""

from __future__ import annotations

import pytest

from adaserve.broker.connection import shown_url


@pytest.mark.parametrize("url, shown", [
    ("redis://ada-worker:s3cret@h:6379/0", "redis://ada-worker:***@h:6379/0"),
    ("rediss://:s3cret@h/0", "rediss://:***@h/0"),
    ("redis://u:p%40ss@h:1/0", "redis://u:***@h:1/0"),
    ("redis://h:1/0", "redis://h:1/0"),
    ("unix:///run/redis.sock", "unix:///run/redis.sock"),
])
def test_a_password_never_shows(url: str, shown: str) -> None:
    assert shown_url(url) == shown
