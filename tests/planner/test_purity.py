"""The planner core is pure: its decisions take ``(state, now)``; clocks, threads and Redis live
in the shell. Every planner module is core unless it is listed below as shell or as bounded, with
the reason; a new module is core by default and this test holds it to that."""

from __future__ import annotations

import ast
from pathlib import Path

PLANNER = Path(__file__).resolve().parents[2] / "planner"
IMPURE = {"time", "threading", "redis", "socket", "subprocess", "os", "datetime", "asyncio", "rq"}

SHELL = {  # the I/O loop around the core, and the planner's command line
    "service.py": "the loop: reads streams, dispatches, keeps the clock",
    "follow.py": "reads telemetry: heartbeats, finished batches",
    "intake.py": "admits jobs from the ingress stream",
    "report.py": "times the scheduler's decisions (wall clock) for the periodic planner.state",
    "admission.py": "ends rejected jobs through the finaliser (a pipeline)",
    "config.py": "names the consumer after the host and process",
    "cli.py": "the planner command",
    "__init__.py": "the package's public API, which includes the shell (Planner)",
    "orloj/feed.py": "ORLOJ's online profiler: reads telemetry, enqueues rq jobs on a timer",
    "orloj/profiler.py": "the Redis side of the re-run samples",
    "mosel/monitor.py": "the thread MOSEL's re-selection runs on",
    "mosel/store.py": "finds profiles and cached matrices in files and Redis",
    "mosel/shell.py": "builds the live MOSEL scheduler from what the store finds, with the monitor",
    "helios/store.py": "reads the candidates' profiles and manifests from files, and the stored PHT",
    "helios/cli.py": "the helios command",
    "helios/__init__.py": "the package's public API, which includes the store",
}
BOUNDED = {  # pure in their decisions, with a stated exception
    "mosel/ilp.py": "the solver's time limit is wall time by nature (CBC); the budget comes in as a number",
    "mosel/selector.py": "gives the ILP its wall-clock budget, counts replan wall time, and locks what it "
                         "shares with the monitor thread (uncontended with InlineTasks)",
    "mosel/matrix.py": "records how long the offline build took",
    "sim/experiment.py": "records how long a simulated run took",
}


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
            if node.module.startswith("adaserve.planner."):
                found.add(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level and node.module:
            found.add("." + node.module)
    return found


def _modules() -> dict[str, Path]:
    return {str(p.relative_to(PLANNER)): p for p in sorted(PLANNER.rglob("*.py"))}


def test_core_modules_touch_no_clock_thread_or_connection() -> None:
    bad = {}
    for name, path in _modules().items():
        if name in SHELL or name in BOUNDED:
            continue
        hit = _imports(path) & IMPURE
        shell = {m for m in _imports(path) if m.rsplit(".", 1)[-1] in {"monitor", "store", "shell", "service", "feed"}}
        if hit or shell:
            bad[name] = sorted(hit | shell)
    assert bad == {}, f"core modules reaching for I/O (move it to the shell or list it with a reason): {bad}"


def test_the_lists_name_modules_that_exist_and_need_the_exception() -> None:
    modules = _modules()
    assert set(SHELL) <= set(modules) and set(BOUNDED) <= set(modules)
    # A bounded module that no longer reaches for a clock belongs back in the core.
    assert all(_imports(modules[name]) & IMPURE for name in BOUNDED)


def test_the_mosel_scheduler_is_pure_by_default() -> None:
    from adaserve.planner.mosel.costs import SubsetCosts
    from adaserve.planner.mosel.scheduler import MoselScheduler
    from adaserve.planner.mosel.synthetic import synthetic_av_digits_profile
    from adaserve.planner.mosel.tasks import InlineTasks

    profile = synthetic_av_digits_profile()
    costs = SubsetCosts.from_profile(profile, "cpu")
    s = MoselScheduler(costs, None, "random", model="av-digits", build=lambda: _tiny_matrix(costs))
    assert isinstance(s.monitor, InlineTasks)
    assert s.matrix is None  # built inline, picked up on the next call
    s.expire(0.0)
    assert s.matrix is not None


def _tiny_matrix(costs: object) -> object:
    from adaserve.planner.mosel.matrix import build_matrix

    return build_matrix(costs, 4, step=0.05)  # type: ignore[arg-type]
