#!/usr/bin/env python3
"""mypy over the whole package, as installed: ``python scripts/typecheck.py [mypy options]``.

The top-level folders become ``adaserve.*`` only through setup.py's ``package_dir`` mapping,
which mypy cannot follow through an editable install; so this lays out links under
``.adaserve/typecheck/adaserve`` as the installed package looks and checks that, with the
settings of pyproject.toml.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def roots() -> dict[str, str]:
    tree = ast.parse((REPO / "setup.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ROOTS" for t in node.targets):
            return dict(ast.literal_eval(node.value))
    raise SystemExit("setup.py has no ROOTS")


def link_tree(where: Path) -> Path:
    pkg = where / "adaserve"
    if pkg.exists():
        shutil.rmtree(pkg)
    pkg.mkdir(parents=True)
    for name, folder in roots().items():
        if name == "adaserve":
            for f in (REPO / folder).iterdir():
                if f.suffix == ".py" or f.name == "py.typed":
                    (pkg / f.name).symlink_to(f)
        else:
            (pkg / name.split(".", 1)[1]).symlink_to(REPO / folder, target_is_directory=True)
    return where


def main() -> int:
    where = link_tree(REPO / ".adaserve" / "typecheck")
    cmd = [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"),
           "--cache-dir", str(where / ".mypy_cache"), "-p", "adaserve", *sys.argv[1:]]
    return subprocess.run(cmd, cwd=where).returncode


if __name__ == "__main__":
    sys.exit(main())
