"""`adaserve bench apps`: several applications of one model at once on the live pipeline.

`bench live` sends one application at one deadline per run, and there a policy has little to
decide (docs/orloj.md, twenty-seventh session). Here the apps of a run differ in what their
requests cost (a language model's generation lengths) and in their deadlines, and arrive
together: what ORLOJ's per-application distributions are for. Each app is its own producer
process (`adaserve produce`), as separate client apps are. Columns are planner policies; rows
are the planner's ``--queue-ms`` (``pools.slot_limit``), which decides whether batches form at
the planner or the worker's slots take each job as it comes.

One stack (an embedded server, one CPU worker, a planner), the planner restarted for each
setting and policy and warmed up by the apps at half their rates; in each repeat every setting and policy gets the same arrivals
and inputs, and they take turns, so a slow spell of the machine falls on all of them.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adaserve.bench.apps_losses import batch_mix, events_since, lost, summed
from adaserve.bench.live import REQUESTS_PER_JOB, LiveStack, warm_up
from adaserve.broker.settings import settings_env

DEFAULT_MODEL = "ee-lm-xs"
# name:new tokens:deadline ms:jobs/s. The short app's requests cost about a fifth of the long
# one's, and its deadline is a quarter: a batch that mixes them runs at the long one's pace.
DEFAULT_APPS = "short:4:60:150,long:32:250:20"
MAX_APPS = 8
WARM_JOBS_PER_S = 20.0
WARM_S, WARM_SHARE = 5.0, 0.5  # the apps' own warm-up: seconds, and the share of their rates


@dataclass(frozen=True)
class App:
    name: str
    max_new_tokens: int
    deadline_ms: float
    jobs_per_s: float


def parse_apps(text: str) -> list[App]:
    """``name:tokens:deadline_ms:jobs_per_s`` entries, comma-separated; ValueError says which is wrong."""
    apps: list[App] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        bits = part.split(":")
        if len(bits) != 4:
            raise ValueError(f"an app is name:tokens:deadline_ms:jobs_per_s, got {part!r}")
        name, tokens, deadline, rate = bits
        try:
            app = App(name, int(tokens), float(deadline), float(rate))
        except ValueError:
            raise ValueError(f"tokens must be an integer and deadline_ms, jobs_per_s numbers in {part!r}") from None
        if not name.replace("-", "").replace("_", "").isalnum() or len(name) > 64:
            raise ValueError(f"app names are up to 64 letters, digits, '-' and '_', got {name!r}")
        if not (1 <= app.max_new_tokens <= 256 and 0 < app.deadline_ms <= 60_000 and 0 < app.jobs_per_s <= 5_000):
            raise ValueError(f"tokens must be 1..256, deadline_ms 0..60000 and jobs_per_s 0..5000 in {part!r}")
        apps.append(app)
    if not apps or len(apps) > MAX_APPS or len({a.name for a in apps}) != len(apps):
        raise ValueError(f"give 1 to {MAX_APPS} apps with distinct names, got {text!r}")
    return apps


class AppsStack(LiveStack):
    """The bench's stack, whose planner takes ``--queue-ms`` from ``queue_ms`` at each restart."""

    queue_ms: float | None = None
    planner_ms: int | None = None  # when the planner running now started (server ms)

    def _planner_args(self) -> list[str]:
        args = super()._planner_args()
        return args if self.queue_ms is None else [*args, "--queue-ms", f"{self.queue_ms:g}"]

    def set_planner(self, policy: str, queue_ms: float, apps: list[App]) -> None:
        """A new planner running ``policy``, warmed up by the apps themselves at a fraction of
        their rates: what a policy learns of the apps (their costs, ORLOJ's groups) is what a
        planner that has served them knows, not the first seconds' guesses."""
        self.queue_ms = queue_ms
        self.planner_ms = int(time.time() * 1000)
        self.restart_planner(policy)
        warm_up(self, self.model, WARM_JOBS_PER_S, seconds=1.0)  # imports, caches
        warm = [App(a.name, a.max_new_tokens, a.deadline_ms, a.jobs_per_s * WARM_SHARE) for a in apps]
        for a, p in zip(warm, _producers(self, warm, 4321, WARM_S, "warm")):
            _, err = p.communicate()
            if p.returncode != 0:
                raise RuntimeError(f"the warm-up producer of app {a.name} failed: {err.decode(errors='replace')[-500:]}")


def _producers(stack: AppsStack, apps: list[App], seed: int, duration_s: float, tag: str) -> list[subprocess.Popen[bytes]]:
    """Every app's ``adaserve produce`` at once, each printing its JSON summary."""
    env = {**os.environ, **settings_env(stack.settings)}
    return [subprocess.Popen(
        [sys.executable, "-m", "adaserve", "produce", "--model", stack.model, "--app", a.name,
         "--max-new-tokens", str(a.max_new_tokens), "--deadline-ms", f"{a.deadline_ms:g}",
         "--rate", f"{a.jobs_per_s:g}", "--duration", f"{duration_s:g}", "-k", str(REQUESTS_PER_JOB),
         "--seed", str(seed + 1000 * i), "--run", f"{tag}-{a.name}", "--grace", "3", "--json", "--no-progress"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for i, a in enumerate(apps)]


def run_apps(stack: AppsStack, apps: list[App], seed: int, duration_s: float, tag: str) -> dict[str, Any]:
    """One run: every app's producer at once; the share of all requests finished on time, and
    each app's, what became of the rest (``lost``), and how the batches mixed the apps
    (``batch_mix``)."""
    since = int(time.time() * 1000) - 1000
    procs = _producers(stack, apps, seed, duration_s, tag)
    got: dict[str, dict[str, Any]] = {}
    for a, p in zip(apps, procs):
        out, err = p.communicate()
        if p.returncode != 0:
            raise RuntimeError(f"the producer of app {a.name} failed: {err.decode(errors='replace')[-500:]}")
        got[a.name] = json.loads(out.decode().strip().splitlines()[-1])
    submitted = sum(s["submitted"] for s in got.values())
    met = sum(s["finish_rate"] * s["submitted"] for s in got.values())
    time.sleep(0.3)  # the last batches' events
    sim = predict(stack, [f"{tag}-{a.name}" for a in apps], since, seed)
    return {"finish_rate": met / submitted if submitted else 0.0, **sim,
            "apps": {n: s["finish_rate"] for n, s in got.items()},
            "unfinished": sum(s["unfinished"] for s in got.values()),
            "lost": {n: lost(s) for n, s in got.items()},
            "mix": batch_mix(events_since(stack.settings, since), {f"{tag}-{a.name}": a.name for a in apps},
                             {a.name: a.deadline_ms for a in apps})}


def predict(stack: AppsStack, runs: list[str], since_ms: int, seed: int) -> dict[str, Any]:
    """What the pipeline simulator, calibrated on this run's telemetry, says the same policy
    finishes of the same jobs (``sim_finish_rate``, and per app ``sim_apps``); nothing when the
    run's telemetry cannot calibrate it."""
    import numpy as np

    from adaserve.bench.live import MAX_BATCH, events_of
    from adaserve.planner.sim.calibrate import calibrate
    from adaserve.planner.sim.pipeline_cli import simulate_policy

    events, before = events_of(stack, runs, since_ms, stack.planner_ms)
    try:
        cal = calibrate(events, stack.model, before=before)
    except ValueError:
        return {}
    if not cal.job_apps or cal.start_ms is None:
        return {}
    jobs_s = (cal.start_ms + np.asarray(cal.submitted_run_ms)) / 1000.0
    res = simulate_policy(cal, stack.policy, jobs_s, requests_per_job=REQUESTS_PER_JOB,
                          deadline_ms=cal.app_deadline_ms[cal.job_apps[0]], seed=seed, max_batch=MAX_BATCH,
                          data_dir=stack.settings.data_dir)
    met = np.unpackbits(np.frombuffer(res.met_bits, dtype=np.uint8))[:res.requests].astype(bool)
    of = np.repeat(np.asarray(cal.job_apps), REQUESTS_PER_JOB)
    return {"sim_finish_rate": res.finish_rate,
            "sim_apps": {a: float(met[of == a].mean()) for a in dict.fromkeys(cal.job_apps)}}


def summarise(queue_ms: float, policy: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """A cell: the medians and spread of its runs, and their ``lost`` and ``mix`` counts summed."""
    fr = [r["finish_rate"] for r in runs]
    names = list(runs[0]["apps"]) if runs else []
    out: dict[str, Any] = {
        "queue_ms": queue_ms, "policy": policy, "finish_rate": round(statistics.median(fr), 4),
        "min": round(min(fr), 4), "max": round(max(fr), 4), "runs": [round(x, 4) for x in fr],
        "apps": {n: round(statistics.median(r["apps"][n] for r in runs), 4) for n in names},
        "unfinished": sum(r["unfinished"] for r in runs)}
    sims = [r["sim_finish_rate"] for r in runs if "sim_finish_rate" in r]
    if sims and len(sims) == len(runs):
        out["sim_finish_rate"] = round(statistics.median(sims), 4)
        out["sim_runs"] = [round(x, 4) for x in sims]
        out["sim_apps"] = {n: round(statistics.median(r["sim_apps"].get(n, 0.0) for r in runs), 4) for n in names}
    if runs and all("lost" in r and "mix" in r for r in runs):
        out["lost"] = {n: summed(r["lost"][n] for r in runs) for n in names}
        out["mix"] = {"batches": sum(r["mix"]["batches"] for r in runs),
                      "mixed_batches": sum(r["mix"]["mixed_batches"] for r in runs),
                      "apps": {n: summed(r["mix"]["apps"][n] for r in runs) for n in names}}
    return out


def paired(cells: list[dict[str, Any]], policy: str = "orloj", against: str = "edf") -> dict[str, Any]:
    """``policy`` minus ``against``, repeat by repeat, for each ``--queue-ms`` that ran both."""
    out: dict[str, Any] = {}
    for q in dict.fromkeys(c["queue_ms"] for c in cells):
        mine = next((c for c in cells if c["queue_ms"] == q and c["policy"] == policy), None)
        other = next((c for c in cells if c["queue_ms"] == q and c["policy"] == against), None)
        if mine is None or other is None:
            continue
        d = [round(a - b, 4) for a, b in zip(mine["runs"], other["runs"])]
        out[f"{q:g}"] = {"diffs": d, "mean": round(sum(d) / len(d), 4), "wins": sum(x > 0 for x in d),
                         "losses": sum(x < 0 for x in d)}
    return out


def bench(stack: AppsStack, apps: list[App], policies: list[str], queues: list[float], repeats: int,
          duration_s: float, tick: Callable[[str], None] = lambda _: None) -> list[dict[str, Any]]:
    runs: dict[tuple[float, str], list[dict[str, Any]]] = {}
    for seed in range(repeats):
        for q in queues:
            for policy in policies:
                tick(f"--queue-ms {q:g}, {policy} #{seed}")
                stack.set_planner(policy, q, apps)
                runs.setdefault((q, policy), []).append(run_apps(stack, apps, seed, duration_s,
                                                                 f"apps-{seed}-{q:g}-{policy}"))
    return [summarise(q, p, runs[(q, p)]) for q in queues for p in policies]


def plot(cells: list[dict[str, Any]], path: Path) -> Path:
    """Finish rate by policy, one group of bars per ``--queue-ms``, whiskers from the runs' spread,
    and a cross at what the calibrated simulator gave for the same runs."""
    from adaserve.bench.figures import panels, save

    queues = list(dict.fromkeys(c["queue_ms"] for c in cells))
    policies = list(dict.fromkeys(c["policy"] for c in cells))
    fig, axes = panels(1, cols=1)
    ax = axes[0][0]
    width = 0.8 / max(len(policies), 1)
    for i, p in enumerate(policies):
        mine = [next(c for c in cells if c["queue_ms"] == q and c["policy"] == p) for q in queues]
        x = [j + i * width for j in range(len(queues))]
        y = [c["finish_rate"] for c in mine]
        err = [[c["finish_rate"] - c["min"] for c in mine], [c["max"] - c["finish_rate"] for c in mine]]
        ax.bar(x, y, width, yerr=err, capsize=3, color=f"C{i}", label=p)
        sim = [(xi, c["sim_finish_rate"]) for xi, c in zip(x, mine) if "sim_finish_rate" in c]
        if sim:  # the calibrated simulator's median for the same runs
            ax.scatter(*zip(*sim), marker="x", color="black", zorder=3, label="simulated" if i == 0 else None)
    ax.set_xticks([j + width * (len(policies) - 1) / 2 for j in range(len(queues))])
    ax.set_xticklabels([f"--queue-ms {q:g}" + (" (every slot)" if q == 0 else "") for q in queues])
    ax.set_ylabel("finish rate, all apps (median, min-max)")
    ax.set_ylim(0, 1.05)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    return save(fig, axes, 1, path)
