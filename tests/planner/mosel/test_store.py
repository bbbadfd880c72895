from __future__ import annotations

from pathlib import Path

import pytest

from adaserve.broker.errors import AdaserveError
from adaserve.broker.settings import load_settings
from adaserve.planner.mosel import synthetic_av_digits_profile
from adaserve.planner.mosel.store import find_profile, load_or_build_matrix


def test_synthetic_when_nothing_is_measured(tmp_path: Path) -> None:
    src = find_profile(load_settings(data_dir=tmp_path, redis_url=""))
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


def test_an_explicit_missing_profile_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(AdaserveError):
        find_profile(load_settings(data_dir=tmp_path, redis_url=""), path=tmp_path / "nope.json")
