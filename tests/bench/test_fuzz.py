"""`adaserve bench fuzz`: a short real run accounts for every hostile entry and keeps serving.

The fuzzer's entries and their labels are tested alone in tests/loadgen; this runs the command a
user runs, end to end, on a real server."""

import json
from pathlib import Path

import pytest

from .conftest import bench_command

_invoke = bench_command("fuzz")


def test_a_short_run_accounts_for_every_entry_and_serves_the_valid_jobs(
        redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADASERVE_REDIS_URL", redis_url)
    monkeypatch.setenv("ADASERVE_DATA_DIR", str(tmp_path))
    # the command sets these for its children: restored after the test
    monkeypatch.setenv("ADASERVE_LIMIT_MAX_MESSAGE_BYTES", "1")
    monkeypatch.setenv("ADASERVE_CONSUMED_KEEP_S", "1")
    res = _invoke("--json", "--entries", "400", "--seed", "3", "--valid-every", "20")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["unaccounted"] == 0 and out["wrong"] == 0 and out["crashes"] == 0 and not out["stalled"]
    assert sum(k["sent"] for k in out["kinds"].values()) == 400
    assert out["valid_before"]["finish_rate"] > 0 and out["valid_during"]["requests"] > 0
    assert out["max_message_bytes"] == 256 * 1024
    assert set(out["memory"]) >= {"planner", "server"}
