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


@pytest.mark.parametrize(("name", "value", "says"), [
    ("ADASERVE_BLOCK_MS", "abc", "ADASERVE_BLOCK_MS='abc': Input should be a valid integer"),
    ("ADASERVE_REDIS_URL", "http://me:pw@x", "ADASERVE_REDIS_URL: redis_url must start with redis://"),
    ("ADASERVE_HEARTBEAT_S", "9", "ADASERVE_WORKER_TTL_S (5) must exceed ADASERVE_HEARTBEAT_S (9)"),
])
def test_a_bad_environment_variable_is_one_line_naming_it(
        monkeypatch: pytest.MonkeyPatch, name: str, value: str, says: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as exc:
        load_settings()
    text = str(exc.value)
    assert says in text and "\n" not in text and "errors.pydantic.dev" not in text and "pw@" not in text, text


def test_bad_limits_in_the_environment_are_a_config_error_on_first_use(monkeypatch: pytest.MonkeyPatch) -> None:
    from adaserve.broker.settings import default_limits

    default_limits.cache_clear()
    monkeypatch.setenv("ADASERVE_LIMIT_ALLOWED_DTYPES", "not json")  # pydantic-settings' own SettingsError
    try:
        with pytest.raises(ConfigError, match="allowed_dtypes"):
            default_limits()
        monkeypatch.setenv("ADASERVE_LIMIT_ALLOWED_DTYPES", '["float32"]')
        monkeypatch.setenv("ADASERVE_LIMIT_MAX_MODALITIES", "0")
        with pytest.raises(ConfigError, match="ADASERVE_LIMIT_MAX_MODALITIES='0': Input should be greater"):
            load_limits()
    finally:
        default_limits.cache_clear()  # the next test reads the environment it sets


def test_settings_travel_to_a_child_process_through_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from adaserve.broker.settings import settings_env

    mine = load_settings(redis_url="redis://127.0.0.1:1/0", namespace="kid", reclaim_idle_ms=2000, max_outage_s=7.5)
    env = settings_env(mine)
    assert env["ADASERVE_RECLAIM_IDLE_MS"] == "2000" and "ADASERVE_MAX_OUTAGE_S" in env
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert load_settings() == mine
