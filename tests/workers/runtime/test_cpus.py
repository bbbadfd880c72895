"""CPUs for a worker's thread pool: the affinity mask capped by a cgroup v2 or v1 CPU quota."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from adaserve.workers.runtime.cpus import available_cpus, quota_cpus

HOST = len(os.sched_getaffinity(0))


def v2(tmp_path: Path, text: str) -> Path:
    (tmp_path / "cpu.max").write_text(text)
    return tmp_path


def v1(tmp_path: Path, quota: str, period: str) -> Path:
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text(quota + "\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text(period + "\n")
    return tmp_path


@pytest.mark.parametrize(("text", "want"), [("150000 100000\n", 1.5), ("max 100000\n", None), ("50000 100000", 0.5),
                                            ("garbage", None)])
def test_cgroup_v2_quota(tmp_path: Path, text: str, want: float | None) -> None:
    assert quota_cpus(v2(tmp_path, text)) == want


def test_cgroup_v1_quota_and_no_cgroup(tmp_path: Path) -> None:
    assert quota_cpus(tmp_path) is None
    assert quota_cpus(v1(tmp_path, "200000", "100000")) == 2.0
    (tmp_path / "unlimited").mkdir()
    assert quota_cpus(v1(tmp_path / "unlimited", "-1", "100000")) is None


def test_the_quota_caps_the_affinity_rounded_up_and_never_below_one(tmp_path: Path) -> None:
    assert available_cpus(v2(tmp_path, "50000 100000")) == 1
    assert available_cpus(tmp_path) == 1  # same file: half a CPU is still one thread
    (tmp_path / "cpu.max").write_text("max 100000")
    assert available_cpus(tmp_path) == HOST
    (tmp_path / "cpu.max").write_text(f"{(HOST + 8) * 100000} 100000")
    assert available_cpus(tmp_path) == HOST  # a quota above the affinity does not add CPUs
    if HOST > 1:
        (tmp_path / "cpu.max").write_text("110000 100000")
        assert available_cpus(tmp_path) == 2
