#!/usr/bin/env python3
"""adaserve's dependencies for one image flavour, from pyproject.toml, one per line.

``cpu``: onnxruntime in place of onnxruntime-gpu (the Dockerfile installs torch from PyTorch's CPU
wheel index first, which ``torch==2.13.*`` then accepts), so the image holds no CUDA libraries.
``gpu``: the dependencies as pyproject.toml states them (CUDA torch and onnxruntime-gpu on x86_64).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import tomllib

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def requirements(flavour: str, pyproject: Path = PYPROJECT) -> list[str]:
    if flavour not in ("cpu", "gpu"):
        raise SystemExit(f"flavour must be cpu or gpu, not {flavour!r}")
    deps: list[str] = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    if flavour == "gpu":
        return deps
    out = [d for d in deps if not re.match(r"onnxruntime(-gpu)?\b", d)]
    return [*out, "onnxruntime>=1.18"]


if __name__ == "__main__":
    print("\n".join(requirements(sys.argv[1] if len(sys.argv) > 1 else "cpu")))
