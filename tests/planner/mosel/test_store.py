from __future__ import annotations

import logging
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from adaserve.broker.errors import AdaserveError
from adaserve.broker.profiles import Profile
from adaserve.broker.settings import Settings, load_settings
from adaserve.planner.mosel import synthetic_av_digits_profile
from adaserve.planner.mosel.store import find_profile, load_or_build_matrix


def test_the_shipped_measurement_then_the_synthetic_stand_in(tmp_path: Path) -> None:
    from adaserve.planner.mosel.store import SHIPPED_DIR

    src = find_profile(load_settings(data_dir=tmp_path, redis_url=""))
    assert src.path == SHIPPED_DIR / "av-digits.json" and not src.synthetic
    src = find_profile(load_settings(data_dir=tmp_path, redis_url=""), "no-such-model")
    assert src.source == "synthetic" and src.synthetic


def test_measured_profile_is_preferred_and_its_matrix_kept_beside_it(tmp_path: Path) -> None:
    measured = synthetic_av_digits_profile(max_batch=4).model_copy(
        update={"host": {"cpu": "test"}, "created_ms": 5.0})
    path = tmp_path / "profiles" / "av-digits.json"
    measured.save(path)
    src = find_profile(load_settings(data_dir=tmp_path, redis_url=""))
    assert src.source == f"file:{path}" and not src.synthetic
    m, mpath, built = load_or_build_matrix(src, tmp_path / "cache", max_size=3, step=0.1)
    assert built and mpath == path.with_name("av-digits.mosel.json") and not m.synthetic
    again, _, built_again = load_or_build_matrix(src, tmp_path / "cache", max_size=3, step=0.1)
    assert not built_again and again.entries == m.entries
    _, _, rebuilt = load_or_build_matrix(src, tmp_path / "cache", max_size=4, step=0.1)
    assert rebuilt  # a different grid is not reused


def test_a_server_that_refuses_is_logged_before_the_shipped_profile_is_used(
        settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from adaserve.planner.mosel.store import SHIPPED_DIR

    url = urlsplit(settings.redis_url)
    if url.scheme not in ("redis", "rediss"):
        pytest.skip("needs a TCP server to log in to")
    wrong = url._replace(netloc=f"nobody:secret-pw@{url.hostname}:{url.port}").geturl()  # real AUTH, refused
    refused = settings.model_copy(update={"redis_url": wrong, "data_dir": tmp_path})
    caplog.set_level(logging.WARNING, logger="adaserve.planner.mosel.store")
    src = find_profile(refused)
    assert src.path == SHIPPED_DIR / "av-digits.json"
    (line,) = [r.getMessage() for r in caplog.records if r.name == "adaserve.planner.mosel.store"]
    assert r"av-digits" in line and "AuthenticationError" in line and "shipped" in line, line
    assert "secret-pw" not in line


def test_an_explicit_missing_profile_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(AdaserveError):
        find_profile(load_settings(data_dir=tmp_path, redis_url=""), path=tmp_path / "nope.json")


def _named(*variants: str) -> Profile:
    from adaserve.broker.profiles import LatencyPoint, QualityPoint

    lat = [LatencyPoint(variant=v, device="cpu", batch_size=1, p50_ms=1.0, p90_ms=1.0, mean_ms=1.0, repeats=1)
           for v in variants]
    return Profile(model="m", created_ms=1.0, latency=lat,
                   quality=[QualityPoint(variant=v, metric="accuracy", value=0.5, n=1) for v in variants])


def test_modality_subsets_are_told_from_exits_by_their_names() -> None:
    from adaserve.planner.mosel.store import modality_subsets

    assert modality_subsets(_named("audio", "image", "audio+image")) == ("audio", "audio+image", "image")
    assert modality_subsets(_named("text", "text+image")) == ("text", "text+image")
    assert modality_subsets(_named("default", "exit1", "exit2")) == ()
    assert modality_subsets(_named("audio", "image")) == ()  # nothing uses both: not a subset family
    assert modality_subsets(_named("audio+image")) == ()
    assert modality_subsets(_named("audio", "image", "audio+image"), device="gpu") == ()


def test_serving_profile_prefers_redis_then_the_data_dir_then_the_shipped_one(tmp_path: Path) -> None:
    from adaserve.planner.mosel.store import SHIPPED_DIR, serving_profile

    settings = load_settings(data_dir=tmp_path, redis_url="")
    shipped = serving_profile(settings, "av-digits", None)
    assert shipped is not None and shipped.path == SHIPPED_DIR / "av-digits.json" and not shipped.synthetic
    local = shipped.profile.model_copy(update={"created_ms": 42.0})
    local.save(tmp_path / "profiles" / "av-digits.json")
    assert serving_profile(settings, "av-digits", None).profile.created_ms == 42.0
    stored = local.model_copy(update={"created_ms": 7.0})
    assert serving_profile(settings, "av-digits", stored).source == "redis:av-digits"
    # A synthetic stand-in is never served from, and models without subsets get nothing.
    assert serving_profile(settings, "av-digits", synthetic_av_digits_profile()).profile.created_ms == 42.0
    assert serving_profile(settings, "fsdd-cnn", None) is None


def test_the_shipped_matrix_belongs_to_the_shipped_profile(tmp_path: Path) -> None:
    from adaserve.planner.mosel.store import build_cached_matrix, cached_matrix, serving_profile

    src = serving_profile(load_settings(data_dir=tmp_path, redis_url=""), "av-digits", None)
    assert src is not None
    m = cached_matrix(src, tmp_path / "cache", max_size=32, step=0.01)
    assert m is not None and m.profile_created_ms == src.profile.created_ms and m.subsets == [
        "audio", "audio+image", "image"]
    # Another grid is not in any cache until built, and then it is found in the cache.
    assert cached_matrix(src, tmp_path / "cache", max_size=3, step=0.1) is None
    built = build_cached_matrix(src, tmp_path / "cache", max_size=3, step=0.1)
    assert cached_matrix(src, tmp_path / "cache", max_size=3, step=0.1) == built
