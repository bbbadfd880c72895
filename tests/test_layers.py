"""The layering, as a contract: which part of adaserve may import which.

Every import statement counts, at any depth (a function-level import is still a dependency, just
a later one), as do ``importlib.import_module``/``__import__`` calls with a literal name. A new
top-level package or module must be placed in ``MAY_IMPORT`` before it can land. docs/DESIGN.md
draws the same table.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Part -> the parts it may import. Modules directly under adaserve/ are parts of their own.
MAY_IMPORT: dict[str, frozenset[str]] = {
    "broker": frozenset(),                                      # the wire contract: the bottom
    "process": frozenset({"broker"}),                           # logging, signals, one-line errors
    "workload": frozenset({"broker"}),                          # arrivals and traces, for both sides
    "models": frozenset({"broker", "process"}),                 # the zoo: data, manifests, builders
    "producers": frozenset({"broker"}),                         # the SDK speaks the contract only
    "telemetry": frozenset({"broker", "process"}),              # reading the telemetry stream
    "planner": frozenset({"broker", "process", "workload", "telemetry"}),  # never a model runtime
    "workers": frozenset({"broker", "process", "models"}),
    "profiling": frozenset({"broker", "process", "models", "workers"}),
    "loadgen": frozenset({"broker", "process", "producers", "models", "workload"}),
    "embedded": frozenset({"broker"}),
    "stack": frozenset({"broker", "embedded", "workers"}),      # the processes on one machine
    "bench": frozenset({"broker", "process", "workload", "models", "producers", "telemetry", "planner",
                        "workers", "profiling", "loadgen", "embedded", "stack"}),
    "app": frozenset({"broker", "process", "workload", "models", "producers", "telemetry", "planner",
                      "workers", "profiling", "loadgen", "embedded", "stack", "bench"}),  # the CLI
}
TOP_MODULES = {"process": "process", "embedded": "embedded", "stack": "stack",
               "cli": "app", "commands": "app", "__main__": "app", "__init__": "app"}


def package_roots() -> dict[str, Path]:
    """``adaserve.<part>`` -> folder, read from setup.py's ``ROOTS`` without running it."""
    tree = ast.parse((REPO / "setup.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ROOTS" for t in node.targets):
            roots = ast.literal_eval(node.value)
            return {name: REPO / folder for name, folder in roots.items()}
    raise AssertionError("setup.py has no ROOTS")


def modules() -> Iterator[tuple[str, Path]]:
    """(dotted module name, file) of every module shipped."""
    for name, folder in package_roots().items():
        files = folder.glob("*.py") if name == "adaserve" else folder.rglob("*.py")
        for f in sorted(files):
            parts = [p for p in f.relative_to(folder).with_suffix("").parts if p != "__init__"]
            yield ".".join([name, *parts]), f


def part_of(module: str) -> str:
    bits = module.split(".")
    return "app" if len(bits) == 1 else TOP_MODULES.get(bits[1], bits[1])


def imported(source: str, module: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """(line, absolute name) of every adaserve import in ``source``, however deeply nested."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                names = [".".join(base + ([node.module] if node.module else []))]
            elif node.module:
                names = [node.module]
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and ((isinstance(node.func, ast.Name) and node.func.id == "__import__")
                   or (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module"))):
            names = [node.args[0].value]
        for name in names:
            if name == "adaserve" or name.startswith("adaserve."):
                yield node.lineno, name


def violations() -> list[str]:
    found = []
    for module, path in modules():
        src = part_of(module)
        assert src in MAY_IMPORT, f"{module} belongs to no part of the layering: add it to MAY_IMPORT"
        for line, name in imported(path.read_text(), module, path.name == "__init__.py"):
            dst = part_of(name)
            if dst != src and dst not in MAY_IMPORT[src]:
                found.append(f"{path.relative_to(REPO)}:{line}: {src} imports {name} ({dst})")
    return found


def test_every_import_respects_the_layering() -> None:
    assert violations() == []


def test_the_layering_has_no_cycles() -> None:
    done: set[str] = set()

    def visit(part: str, path: tuple[str, ...]) -> None:
        assert part not in path, f"cycle: {' -> '.join((*path, part))}"
        if part not in done:
            for dep in MAY_IMPORT[part]:
                visit(dep, (*path, part))
            done.add(part)

    for part in MAY_IMPORT:
        visit(part, ())


def test_every_shipped_folder_is_placed() -> None:
    assert {part_of(name) for name in package_roots()} <= set(MAY_IMPORT)


@pytest.mark.parametrize("source", [
    "def later():\n    from adaserve.workers.runtime import load_runner\n",
    "import importlib\nrunner = importlib.import_module('adaserve.workers.runtime')\n",
    "from ..workers import runtime\n",
])
def test_lazy_and_relative_imports_do_not_escape(source: str) -> None:
    found = [name for _, name in imported(source, "adaserve.planner.core", False)]
    assert found and all(part_of(n) == "workers" for n in found)
    assert "workers" not in MAY_IMPORT["planner"]


DOTTED = re.compile(r"^adaserve(\.[a-z_][a-z0-9_]*)+$")


def test_names_that_point_into_the_code_resolve() -> None:
    """rq job functions and the like are named by string: a move must not leave them dangling."""
    files = dict(modules())
    dangling = []
    for _, path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and DOTTED.match(node.value):
                target, attr = node.value, None
                if target not in files:
                    target, _, attr = target.rpartition(".")
                if target not in files:
                    dangling.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value}")
                elif attr is not None and not _defines(files[target], attr):
                    dangling.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value}")
    assert dangling == []


def _defines(path: Path, name: str) -> bool:
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name) == name for a in node.names):
            return True
    return False
