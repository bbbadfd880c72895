"""Profiles through Redis and files: schema round trip and merge semantics."""

from __future__ import annotations

import redis

from adaserve.broker import Keys, Settings
from adaserve.broker.profiles import ExecHistogram, LatencyPoint, PartPoint, Profile, QualityPoint
from adaserve.profiling.store import (
    load,
    load_file,
    merge,
    merge_into_redis,
    profile_path,
    save_file,
    stored_models,
)


def _lat(variant: str, b: int, ms: float, device: str = "cpu") -> LatencyPoint:
    return LatencyPoint(variant=variant, device=device, batch_size=b, p50_ms=ms, p90_ms=ms * 1.2,
                        mean_ms=ms * 1.1, repeats=3)


def _profile(variant: str, ms: float, device: str = "cpu") -> Profile:
    return Profile(
        model="m", created_ms=1000.0 + ms, host={"host": "h", "device": device},
        latency=[_lat(variant, 1, ms, device), _lat(variant, 4, 3 * ms, device)],
        quality=[QualityPoint(variant=variant, metric="accuracy", value=0.5 + ms / 100, n=20)],
        exec_hist=[ExecHistogram(variant=variant, device=device, edges_ms=[0.0, 1.0, 2.0], counts=[3, 1],
                                 exits={"1": 0.75, "3": 0.25})],
        parts=[PartPoint(variant=variant, device=device, batch_size=1, p50_ms=ms, out_bytes=62720)],
    )


def test_round_trip_through_redis(r: redis.Redis[bytes], settings: Settings) -> None:
    keys = Keys(settings.namespace)
    p = _profile("exit1", 2.0)
    assert load(r, keys, "m") is None
    stored = merge_into_redis(r, keys, p)
    assert stored == p
    assert r.get(keys.profile("m")) is not None
    back = load(r, keys, "m")
    assert back == p and back.latency_ms("exit1", "cpu", 4) == 6.0 and back.quality_of("exit1") == 0.52
    assert stored_models(r, keys, settings.data_dir) == ["m"]


def test_merge_replaces_only_the_measured_variant_and_device(r: redis.Redis[bytes], settings: Settings) -> None:
    keys = Keys(settings.namespace)
    merge_into_redis(r, keys, _profile("a", 1.0))
    merge_into_redis(r, keys, _profile("b", 5.0))
    merge_into_redis(r, keys, _profile("a", 2.0, device="gpu"))
    final = merge_into_redis(r, keys, _profile("a", 3.0))
    assert final.latency_ms("a", "cpu", 1) == 3.0
    assert final.latency_ms("a", "gpu", 1) == 2.0
    assert final.latency_ms("b", "cpu", 1) == 5.0
    assert sorted(q.variant for q in final.quality) == ["a", "b"]
    assert len(final.exec_hist) == 3 and len(final.parts) == 3
    assert load(r, keys, "m") == final


def test_merge_refuses_another_model() -> None:
    other = _profile("a", 1.0).model_copy(update={"model": "n"})
    try:
        merge(_profile("a", 1.0), other)
    except ValueError as exc:
        assert "'n'" in str(exc)
    else:
        raise AssertionError("merging profiles of two models must fail")


def test_file_round_trip(settings: Settings) -> None:
    p = _profile("x", 4.0)
    path = save_file(settings.data_dir, p)
    assert path == profile_path(settings.data_dir, "m") and path.is_file()
    assert load_file(settings.data_dir, "m") == p
    assert load_file(settings.data_dir, "absent") is None
