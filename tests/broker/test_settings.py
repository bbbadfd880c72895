import pytest

from adaserve.broker import ConfigError, Keys, load_limits, load_settings


def test_environment_is_read_and_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADASERVE_REDIS_URL", "redis://h:1/0")
    monkeypatch.setenv("ADASERVE_NAMESPACE", "prod")
    s = load_settings()
    assert s.redis_url == "redis://h:1/0" and s.namespace == "prod"


@pytest.mark.parametrize(
    "overrides",
    [{"namespace": "a b"}, {"redis_url": "http://x"}, {"heartbeat_s": 5, "worker_ttl_s": 1}, {"block_ms": 0}],
)
def test_bad_settings_fail_at_construction(overrides: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        load_settings(**overrides)


def test_bad_limits_fail() -> None:
    with pytest.raises(ConfigError):
        load_limits(min_deadline_ms=10, max_deadline_ms=5)
    with pytest.raises(ConfigError):
        load_limits(allowed_dtypes=("complex64",))


def test_keys_share_one_hash_tag() -> None:
    k = Keys("ns")
    names = [k.jobs, k.batches("cpu"), k.telemetry, k.dead, k.reply("c"), k.job("j"), k.workers, k.profile("m")]
    assert all(n.startswith("{ns}:") for n in names) and len(set(names)) == len(names)
