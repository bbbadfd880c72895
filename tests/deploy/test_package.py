"""The wheel: built without setuptools' warnings and carrying every data file the code reads."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# folder in the repository -> where setup.py's package_dir puts it in the wheel
DATA = {"models/zoo": "adaserve/models/zoo", "models/data": "adaserve/models/data",
        "planner/profiles": "adaserve/planner/profiles", "planner/mosel/profiles": "adaserve/planner/mosel/profiles",
        "workload/traces": "adaserve/workload/traces"}


def test_the_wheel_builds_quietly_with_all_its_data(tmp_path: Path) -> None:
    pytest.importorskip("setuptools")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                           str(REPO), "-w", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "would be ignored" not in done.stderr + done.stdout
    (wheel,) = tmp_path.glob("adaserve-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    tracked = subprocess.run(["git", "-C", str(REPO), "ls-files", *DATA], capture_output=True, text=True).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout: nothing to compare the wheel with")
    missing = [f for f in tracked if next(dst + f[len(src):] for src, dst in DATA.items() if f.startswith(src + "/"))
               not in names]
    assert missing == []
    assert "adaserve/py.typed" in names and "adaserve/broker/py.typed" in names
