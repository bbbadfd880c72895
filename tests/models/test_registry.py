from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from rich.progress import Progress

from adaserve.broker.errors import ModelNotFound
from adaserve.models import registry
from adaserve.models.manifest import read_manifest, write_manifest


def test_shipped_model_is_found(tmp_path: Path) -> None:
    model_dir, info = registry.load_info("fsdd-cnn", tmp_path)
    assert model_dir == registry.zoo_dir() / "fsdd-cnn"
    assert info.name == "fsdd-cnn"


def test_data_dir_wins_over_the_zoo(tmp_path: Path) -> None:
    built = registry.built_dir("fsdd-cnn", tmp_path)
    shutil.copytree(registry.zoo_dir() / "fsdd-cnn", built)
    info = read_manifest(built)
    write_manifest(built, info.model_copy(update={"description": "mine"}))
    model_dir, found = registry.load_info("fsdd-cnn", tmp_path)
    assert model_dir == built and found.description == "mine"
    names = [i.name for _, i in registry.list_models(tmp_path)]
    assert names.count("fsdd-cnn") == 1


def test_unknown_model(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFound, match="not built"):
        registry.find_model("no-such-model", tmp_path)
    with pytest.raises(ModelNotFound, match="unknown model"):
        registry.builder("no-such-model")


def test_helper_modules_are_imported_lazily(monkeypatch: pytest.MonkeyPatch) -> None:
    assert registry.BUILDERS["ee-lm-xs"] == ("adaserve.models.lm", "build_xs")
    assert registry.BUILDERS["ee-lm-s"] == ("adaserve.models.lm", "build_s")
    assert registry.BUILDERS["effnet-lite0"] == ("adaserve.models.effnet", "build")
    monkeypatch.setitem(registry.BUILDERS, "ghost", ("adaserve.models.ghost_module", "build"))
    with pytest.raises(ModelNotFound, match="cannot be imported"):
        registry.builder("ghost")
    monkeypatch.setitem(registry.BUILDERS, "ghost", ("adaserve.models.datasets", "build"))
    with pytest.raises(ModelNotFound, match="no function"):
        registry.builder("ghost")


def test_failed_build_keeps_the_previous_artifacts(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "m"
    out.mkdir()
    (out / "old").write_text("keep")

    def broken(out_dir: Path, **_: object) -> None:
        (out_dir / "half").write_text("x")
        raise RuntimeError("boom")

    monkeypatch.setattr(registry, "builder", lambda name: broken)
    with Progress(disable=True) as progress, pytest.raises(RuntimeError):
        registry.build_model("fsdd-cnn", out, progress=progress)
    assert [p.name for p in tmp_path.iterdir()] == ["m"]
    assert (out / "old").read_text() == "keep"
