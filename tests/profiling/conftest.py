"""A data directory holding a tiny ee-lm-xs build, shared by the profiler's tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.progress import Progress

from adaserve.models.registry import build_model, built_dir


@pytest.fixture(scope="session")
def lm_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("profiling-data")
    with Progress(disable=True) as progress:
        build_model("ee-lm-xs", built_dir("ee-lm-xs", data_dir), tiny=True, seed=0, progress=progress)
    return data_dir


@pytest.fixture(scope="session")
def effnet_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """effnet-lite0 exported from the installed wheels (about 30 s and 37 MB: slow tests only)."""
    data_dir = tmp_path_factory.mktemp("effnet-data")
    with Progress(disable=True) as progress:
        build_model("effnet-lite0", built_dir("effnet-lite0", data_dir), tiny=True, seed=0, progress=progress)
    return data_dir
