"""Examples are tests: every Python block of the README runs against a real server, planner and
worker, as a user would run it (a fresh interpreter with ADASERVE_REDIS_URL set)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from adaserve.broker import connect, load_settings
from adaserve.stack import Stack

pytestmark = pytest.mark.slow
README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
JS = re.findall(r"```js\n(.*?)```", README.read_text(), flags=re.S)
# What the Node.js example's install line asks for, pinned so a new major cannot break it unseen.
NODE_PACKAGES = {"redis": "6.3.1", "@msgpack/msgpack": "3.1.3"}


@pytest.fixture(scope="module")
def stack(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    data = tmp_path_factory.mktemp("readme")
    settings = load_settings(redis_url=redis_url, namespace="readme" + uuid.uuid4().hex[:8], data_dir=data)
    s = Stack(settings, cpu_workers=1, gpu_worker=False, worker_threads=1, log_dir=data / "logs")
    with s:
        s.wait_ready(120)
        yield s
    r = connect(settings)
    keys = list(r.scan_iter(match="{" + settings.namespace + "}:*"))
    if keys:
        r.delete(*keys)


def test_the_readme_has_python_examples() -> None:
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_a_readme_example_runs(stack: Stack, code: str) -> None:
    done = subprocess.run([sys.executable, "-c", code], env=_env(stack), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), "an example prints what it got"
    assert "failed" not in done.stdout and "rejected" not in done.stdout
    if "make_job(" in code:  # the classifier example prints each request's status
        assert done.stdout.count("completed") == 4, done.stdout


def _env(stack: Stack) -> dict[str, str]:
    return {**os.environ, "ADASERVE_REDIS_URL": stack.settings.redis_url,
            "ADASERVE_NAMESPACE": stack.settings.namespace, "ADASERVE_DATA_DIR": str(stack.settings.data_dir)}


def test_the_node_example_runs(stack: Stack, tmp_path: Path) -> None:
    if not (shutil.which("node") and shutil.which("npm")):
        pytest.skip("node and npm are not installed here")
    (code,) = JS
    (tmp_path / "package.json").write_text(json.dumps({"type": "module", "dependencies": NODE_PACKAGES}))
    (tmp_path / "producer.mjs").write_text(code)
    install = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=300)
    if install.returncode != 0:
        pytest.skip(f"npm could not install {NODE_PACKAGES}: {install.stderr.strip()[-300:]}")
    done = subprocess.run(["node", "producer.mjs"], cwd=tmp_path, env=_env(stack), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    lines = sorted(line.split() for line in done.stdout.splitlines())
    assert [(rid, status) for rid, status, _ in lines] == [("r0", "completed"), ("r1", "completed")], done.stdout
    assert all(0 <= int(prediction) <= 9 for _, _, prediction in lines)
