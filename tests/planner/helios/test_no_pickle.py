"""Nothing on HELIOS's path uses pickle: no module imports a pickle-based serialiser or calls a
loader that unpickles (torch.load, numpy's allow_pickle); what it stores and sends is msgpack."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PATH = [*sorted((ROOT / "planner" / "helios").glob("*.py")), *sorted((ROOT / "bench").glob("helios*.py")),
        ROOT / "workers" / "lmstats.py", ROOT / "workers" / "results.py", ROOT / "planner" / "follow.py"]
BANNED_MODULES = {"pickle", "cPickle", "_pickle", "cloudpickle", "dill", "shelve", "joblib", "marshal"}


def _offences(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names if a.name.split(".")[0] in BANNED_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in BANNED_MODULES:
            out.append(node.module)
        elif isinstance(node, ast.Attribute) and node.attr == "load" and isinstance(node.value, ast.Name) \
                and node.value.id == "torch":
            out.append("torch.load")
        elif isinstance(node, ast.keyword) and node.arg == "allow_pickle":
            out.append("allow_pickle")
    return out


def test_the_helios_path_uses_no_pickle() -> None:
    assert len(PATH) > 10
    bad = {str(p.relative_to(ROOT)): o for p in PATH if (o := _offences(p))}
    assert bad == {}


def test_the_scan_would_see_a_pickle(tmp_path: Path) -> None:
    f = tmp_path / "x.py"
    f.write_text("import pickle\nimport torch\ntorch.load('m')\nimport numpy as np\nnp.load('a', allow_pickle=True)\n")
    assert _offences(f) == ["pickle", "torch.load", "allow_pickle"]
