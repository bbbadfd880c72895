"""TLS against a real server that speaks nothing else: jobs served over ``rediss://`` with the
test's CA, and a CA that did not sign the server's certificate is one clear line, not a wait."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import redis
from typer.testing import CliRunner

from adaserve.broker import Settings, connect, is_transient, load_settings
from adaserve.cli import app
from adaserve.models.datasets import sample_inputs
from adaserve.planner.service import Planner
from adaserve.producers import Client, make_job


@pytest.fixture
def settings(tls_server, tmp_path: Path) -> Settings:
    """The session's usual test settings, on the TLS server (the root conftest's ``r`` and
    ``standin`` fixtures follow this one)."""
    return load_settings(redis_url=tls_server.url, tls_ca_file=tls_server.ca, namespace="t" + uuid.uuid4().hex[:12],
                         data_dir=tmp_path / "data", heartbeat_s=0.2, worker_ttl_s=1.5, reclaim_idle_ms=1000, block_ms=50)


def test_the_sdk_gets_its_results_over_tls(settings: Settings, r: redis.Redis[bytes], standin: Callable[..., object]) -> None:
    assert r.connection_pool.connection_kwargs["ssl_ca_certs"] == str(settings.tls_ca_file)
    standin()
    with Client(settings) as c:
        rows = [{"x": np.array([v], np.float32)} for v in (7.0, 3.0)]
        res = c.submit(make_job("m", rows, 10_000.0)).result(10)
    assert res.predictions == [7, 3]


def test_a_real_planner_and_worker_serve_over_tls(settings: Settings, serving: Callable[..., object]) -> None:
    inputs, labels = sample_inputs("fsdd-cnn", 16, seed=11)
    with serving(settings), Client(settings) as c:
        res = c.submit(make_job("fsdd-cnn", list(inputs), 10_000.0)).result(30)
    assert res.completed == 16
    assert sum(p == y for p, y in zip(res.predictions, labels)) >= 14


def _wrong_ca(settings: Settings, tls_server) -> Settings:
    return load_settings(**{**settings.model_dump(), "tls_ca_file": tls_server.other_ca})


def test_a_ca_that_did_not_sign_the_server_is_a_clear_error_not_an_outage(settings: Settings, tls_server) -> None:
    client = connect(_wrong_ca(settings, tls_server))
    with pytest.raises(redis.ConnectionError) as caught:
        client.ping()
    client.close()
    msg = str(caught.value)
    assert f"the certificate of 127.0.0.1:{tls_server.port} is not trusted" in msg and "ADASERVE_TLS_CA_FILE" in msg, msg
    assert "\n" not in msg
    assert not is_transient(caught.value)  # retrying cannot make the certificate trusted


def test_a_planner_with_the_wrong_ca_stops_at_once(settings: Settings, tls_server) -> None:
    """A service waits out outages for ever; an untrusted certificate is none, so it must not."""
    planner = Planner(_wrong_ca(settings, tls_server))
    raised: list[BaseException] = []

    def run() -> None:
        try:
            planner.run(threading.Event())
        except BaseException as exc:
            raised.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(20)
    assert not t.is_alive(), "the planner kept retrying an untrusted certificate"
    assert len(raised) == 1 and isinstance(raised[0], redis.ConnectionError) and "not trusted" in str(raised[0])


def test_the_cli_says_the_wrong_ca_in_one_line(settings: Settings, tls_server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADASERVE_REDIS_URL", tls_server.url)
    monkeypatch.setenv("ADASERVE_TLS_CA_FILE", str(tls_server.other_ca))
    monkeypatch.setenv("ADASERVE_NAMESPACE", settings.namespace)
    monkeypatch.setenv("COLUMNS", "60")
    result = CliRunner().invoke(app, ["stats"])
    assert result.exit_code == 2, (result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "not trusted" in lines[0] and "ADASERVE_TLS_CA_FILE" in lines[0], result.output


def test_a_missing_ca_file_is_refused_at_construction(settings: Settings, tmp_path: Path) -> None:
    from adaserve.broker.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^invalid adaserve settings: ADASERVE_TLS_CA_FILE='.*nope.pem': no such file$"):
        load_settings(redis_url=settings.redis_url, tls_ca_file=str(tmp_path / "nope.pem"))


def test_the_processes_adaserve_up_starts_connect_over_tls_too(settings: Settings, tmp_path: Path) -> None:
    """The planner and worker children get the TLS settings with the URL, also those given to
    ``Stack`` in code rather than in the environment."""
    from adaserve.stack import Stack

    inputs, _ = sample_inputs("fsdd-cnn", 4, seed=12)
    with Stack(settings, cpu_workers=1, gpu_worker=False, worker_threads=1, log_dir=tmp_path / "logs") as stack:
        stack.wait_ready(120)
        with Client(settings) as c:
            res = c.submit(make_job("fsdd-cnn", list(inputs), 10_000.0)).result(60)
    assert res.completed == 4


def test_a_server_that_requires_client_certificates_gets_the_configured_one(settings: Settings, tls_server) -> None:
    with_cert = load_settings(**{**settings.model_dump(), "redis_url": tls_server.mtls_url,
                                 "tls_cert_file": tls_server.client[0], "tls_key_file": tls_server.client[1]})
    r = connect(with_cert)
    assert r.ping()
    r.close()
    without = connect(load_settings(**{**settings.model_dump(), "redis_url": tls_server.mtls_url}))
    with pytest.raises(redis.ConnectionError):
        without.ping()
    without.close()
