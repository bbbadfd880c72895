"""`adaserve profile`, `adaserve profile show` and the plot, through the real CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from rq import SimpleWorker
from rq.serializers import JSONSerializer
from typer.testing import CliRunner

from adaserve.broker import Keys, Settings, load_settings
from adaserve.cli import app
from adaserve.profiling.jobs import queue


@pytest.fixture
def env(settings: Settings, lm_data_dir: Path, r: redis.Redis[bytes],
        monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    monkeypatch.setenv("ADASERVE_REDIS_URL", settings.redis_url)
    monkeypatch.setenv("ADASERVE_NAMESPACE", settings.namespace)
    monkeypatch.setenv("ADASERVE_DATA_DIR", str(lm_data_dir))
    s = load_settings(redis_url=settings.redis_url, namespace=settings.namespace, data_dir=lm_data_dir)
    yield s
    q = queue(s, r)
    for registry in (q.finished_job_registry, q.failed_job_registry):
        for job_id in registry.get_job_ids():
            r.delete(f"rq:job:{job_id}", f"rq:results:{job_id}")
        r.delete(registry.key)
    q.delete(delete_jobs=True)


def test_profile_enqueues_then_show_prints_and_plots(env: Settings, r: redis.Redis[bytes],
                                                     tmp_path: Path) -> None:
    cli = CliRunner()
    res = cli.invoke(app, ["profile", "ee-lm-xs", "--variant", "depth1", "--tiny",
                           "--batch-sizes", "1,2", "--repeats", "2"])
    assert res.exit_code == 0, res.output
    assert "enqueued 1 profiling job" in res.output
    q = queue(env, r)
    assert q.count == 1
    SimpleWorker([q], connection=r, serializer=JSONSerializer).work(burst=True)
    assert r.get(Keys(env.namespace).profile("ee-lm-xs")) is not None

    png = tmp_path / "p.png"
    res = cli.invoke(app, ["profile", "show", "ee-lm-xs", "--json", "--plot", str(png)])
    assert res.exit_code == 0, res.output
    (profile,) = json.loads(res.stdout)
    assert profile["model"] == "ee-lm-xs"
    assert [p["batch_size"] for p in profile["latency"]] == [1, 2]
    assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    res = cli.invoke(app, ["profile", "show", "ee-lm-xs"])
    assert res.exit_code == 0 and "perplexity" in res.stdout and "depth1" in res.stdout


def test_unknown_model_and_missing_profile_fail_cleanly(env: Settings) -> None:
    cli = CliRunner()
    res = cli.invoke(app, ["profile", "no-such-model"])
    assert res.exit_code == 2 and "no-such-model" in res.output
    res = cli.invoke(app, ["profile", "show", "ee-lm-s"])
    assert res.exit_code == 2 and "no profile" in res.output
