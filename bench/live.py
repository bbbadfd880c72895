"""`adaserve bench live`: the batching policies on the real pipeline, with the simulator beside.

Per model, one stack: an embedded server (without AOF unless ``persist``: its rewrites take a
core for seconds at unpredictable times, which is noise here, not policy), one CPU worker with
the defaults users get, and a planner. The pipeline's capacity is measured first, once per
deadline: the highest rate at which EDF finishes 95 % of the requests within it (bisection). A
shorter deadline caps the batches, so the pipeline sustains less: on a 2-core host ee-audio's
capacity at 30 ms was 0.72-0.88 of its capacity at 100 ms, and a load of "0.8" of the longer
deadline's capacity was already an overload at the shorter one.
Then, repeat by repeat and policy by policy, the planner is restarted with the policy, warmed up
(2 s at half the longest deadline's capacity, not measured), and serves every cell: loads as
fractions of the capacity at the cell's deadline, two deadlines, Poisson jobs of 4 held-out
requests (in columns, built and encoded before the run's clock starts, so that the load generator
takes little of the cores the pipeline runs on), the same arrivals and inputs for every policy in
a repeat. Policies take turns within each repeat, so a slow spell of the machine falls on all of
them. After each run its telemetry calibrates the pipeline simulator (``planner/sim/calibrate.py``)
and the same jobs are simulated with a fresh scheduler of the policy and the planner's own
admission control, told what the planner had seen finish since it started: ``sim_finish_rate`` is
that prediction. Each cell also keeps how the requests that did not finish on time ended, live and
simulated (late, expired, refused ``overloaded``).

A column is a policy name the planner accepts (``--policies``), so a new policy or placement rule
joins the comparison by its name. One JSON object with ``--json``; a plot (``--plot``).
"""

from __future__ import annotations

import itertools
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from adaserve.broker import Settings, connect, load_settings
from adaserve.loadgen import LoadOptions, load_options, run_load, schedule
from adaserve.planner.sim.engine import SimResult
from adaserve.stack import Stack

LIVE_POLICIES = ("orloj", "edf", "fifo", "clockwork", "nexus", "clipper")
MODELS = ("ee-audio", "fsdd-cnn")
LOADS = (0.5, 0.8, 1.2)
DEADLINES_MS = (30.0, 100.0)
REQUESTS_PER_JOB = 4
MAX_BATCH = 32


class LiveStack(Stack):
    """The deployment a user gets, with the worker preloading only the benchmarked model."""

    def __init__(self, settings: Settings, model: str, policy: str, log_dir: Path, persist: bool = False) -> None:
        # A private embedded server (its own directory under the logs): the user's `adaserve up`
        # data is neither loaded nor touched; models still come from the user's data directory.
        super().__init__(settings, cpu_workers=1, gpu_worker=False, policy=policy, log_dir=log_dir,
                         max_batch=MAX_BATCH, persist=persist,
                         server_dir=Path(tempfile.mkdtemp(prefix="server-", dir=log_dir)))
        self.model = model

    def _spawn(self, name: str, args: list[str], env: dict[str, str]) -> None:
        if args[0] == "worker":
            args = [*args, "--models", self.model]
        super()._spawn(name, args, env)


@contextmanager
def live_stack(model: str, policy: str, log_dir: Path, persist: bool = False) -> Iterator[LiveStack]:
    with LiveStack(load_settings(), model, policy, log_dir, persist) as stack:
        stack.wait_ready()
        yield stack


def warm_up(stack: Stack, model: str, rate_jobs: float, seconds: float = 2.0) -> None:
    """Unmeasured load after a planner (re)start: its fits and the worker's caches settle."""
    opts = load_options(model=model, rate=rate_jobs, duration_s=seconds, requests_per_job=REQUESTS_PER_JOB,
                        deadline_ms=100.0, seed=1234, grace_s=3.0)
    run_load(stack.settings, opts, progress=False)


def events_of(stack: Stack, run: str | Sequence[str], since_ms: int,
              planner_ms: int | None = None) -> tuple[list[Any], list[Any]]:
    """The telemetry of one run (or of several at once: ``run_events``), and the batches that finished between ``planner_ms`` (the
    planner's start) and ``since_ms``: what the planner's admission control remembers."""
    from adaserve.telemetry import EventFilter, TelemetryReader, run_events

    r = connect(stack.settings)
    try:
        reader = TelemetryReader(r, stack.settings)
        before = [] if planner_ms is None else [
            x.event for x in reader.history(since_ms=planner_ms, until_ms=since_ms,
                                            keep=EventFilter(types=("batch.finished",)))]
        return run_events(reader, run, since_ms=since_ms), before
    finally:
        r.close()


def predict(policy: str, opts: LoadOptions, events: list[Any], seed: int, data_dir: Path,
            before: list[Any] | None = None, keep: Path | None = None) -> tuple[SimResult | None, float | None]:
    """The calibrated simulator's result for the run these events came from, and the run's
    longest gap between dispatches (``longest_gap_ms``); with ``keep``, the calibration is saved
    there as ``RUN.json`` (``adaserve sim --calibration`` replays it)."""
    from adaserve.planner.sim.calibrate import calibrate
    from adaserve.planner.sim.pipeline_cli import simulate_policy

    try:
        cal = calibrate(events, opts.model, before=before or ())
    except ValueError:
        return None, None
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        cal.save(keep / f"{opts.run}.json")
    return simulate_policy(cal, policy, schedule(opts), requests_per_job=opts.requests_per_job,
                           deadline_ms=opts.deadline_ms, seed=seed, max_batch=MAX_BATCH,
                           data_dir=data_dir), longest_gap_ms(cal.dispatch_run_ms)


def longest_gap_ms(dispatches_ms: list[float]) -> float | None:
    """The longest wait between two consecutive dispatches of a run: a stall of the planner's
    loop shows here (an import in ORLOJ's feed held it 18-39 ms once a run; docs/orloj.md,
    twenty-third session). None with fewer than two dispatches."""
    if len(dispatches_ms) < 2:
        return None
    at = sorted(dispatches_ms)
    return round(max(b - a for a, b in itertools.pairwise(at)), 2)


def capacity(stack: Stack, model: str, deadline_ms: float, *, seconds: float = 5.0, steady_s: float = 2.0, target: float = 0.95,
             lo_rps: float = 250.0, hi_rps: float = 16_000.0, steps: int = 7) -> tuple[float, str | None]:
    """The highest offered rate (requests/s) at which EDF finishes ``target`` of the requests within
    ``deadline_ms``, by bisection on a log scale (``bisect_rate``). Throughput under an unbounded
    backlog would not do: every batch is then the largest, which no deadline-bound load sees, and
    offered far too much EDF finishes almost nothing on time. A probe is also judged by the
    requests due after its first ``steady_s``: a rate a little above the capacity builds its
    backlog slowly, and the probe's first seconds, served from empty queues, hide it. The
    search's ceiling is far above this machine's capacity: at 4,000 requests/s it clamped the
    capacity once the serving path got cheaper.
    Also returns where the search was clamped: ``"ceiling"`` when every probe passed (the
    capacity is only known to be at least that), ``"floor"`` when none did (a busy machine), else
    None."""
    def probe(rps: float) -> bool:
        opts = load_options(model=model, rate=rps / REQUESTS_PER_JOB, duration_s=seconds,
                            requests_per_job=REQUESTS_PER_JOB, deadline_ms=deadline_ms, seed=99, grace_s=3.0)
        got = run_load(stack.settings, opts, progress=False, steady_from_s=steady_s)
        return min(got.finish_rate, got.steady_finish_rate if got.steady_finish_rate is not None else 0.0) >= target

    return bisect_rate(probe, lo_rps, hi_rps, steps)


def bisect_rate(probe: Callable[[float], bool], lo_rps: float, hi_rps: float, steps: int) -> tuple[float, str | None]:
    """``capacity``'s search: a rate is judged by two probes of three. On a host with spells one
    probe decides wrongly either way: a single passing probe set fsdd-cnn's capacity at 11,192
    requests/s (November 28), where every policy then failed at 0.8 of it; a single failing one
    set its capacity at 30 ms to 6,875 (November 29), where ORLOJ, EDF, Nexus and Clipper then
    finished 0.94-1.0 at 1.2 of it. Two probes that agree decide; a third breaks a split."""
    passed = failed = 0
    for _ in range(steps):
        mid = (lo_rps * hi_rps) ** 0.5
        votes = [probe(mid), probe(mid)]
        if votes[0] != votes[1]:
            votes.append(probe(mid))
        if votes.count(True) >= 2:
            lo_rps, passed = mid, passed + 1
        else:
            hi_rps, failed = mid, failed + 1
    return lo_rps, ("ceiling" if not failed else "floor" if not passed else None)


def run_cell(stack: Stack, policy: str, model: str, rate_jobs: float, deadline_ms: float, seed: int,
             duration_s: float, planner_ms: int | None = None, keep: Path | None = None) -> dict[str, Any]:
    """One run; ``planner_ms``: when the planner serving it started (its admission control's
    memory); ``keep``: where to save the run's calibration."""
    opts = load_options(model=model, rate=rate_jobs, duration_s=duration_s, requests_per_job=REQUESTS_PER_JOB,
                        deadline_ms=deadline_ms, seed=seed, grace_s=3.0)
    opts = opts.model_copy(update={"run": f"{opts.run}-{policy}"})
    since = int(time.time() * 1000) - 1000
    summary = run_load(stack.settings, opts, progress=False)
    time.sleep(0.3)  # the last batch's events
    events, before = events_of(stack, opts.run, since, planner_ms)
    sim, gap_ms = predict(policy, opts, events, seed, stack.settings.data_dir, before, keep)
    met = round(summary.finish_rate * summary.submitted)
    return {"finish_rate": summary.finish_rate, "sim_finish_rate": sim.finish_rate if sim else None,
            "late": summary.completed - met, "expired": summary.expired, "rejected": summary.rejected,
            "unfinished": summary.unfinished, "p50_ms": summary.p50_ms, "run": opts.run, "loop_gap_ms": gap_ms,
            "sim": None if sim is None else {"late": sim.late, "expired": sim.expired, "rejected": sim.rejected}}


def summarise(model: str, load: float, rate_jobs: float, deadline_ms: float, policy: str,
              runs: list[dict[str, Any]], capacity_rps: float | None = None) -> dict[str, Any]:
    """One cell: the runs' median, spread and simulated figures; ``capacity_rps``: what ``load``
    is a fraction of (the capacity at this cell's deadline)."""
    fr = [r["finish_rate"] for r in runs]
    sims = [r["sim_finish_rate"] for r in runs if r["sim_finish_rate"] is not None]
    return {"model": model, "load": load, "jobs_per_s": round(rate_jobs, 2), "deadline_ms": deadline_ms,
            "capacity_rps": None if capacity_rps is None else round(capacity_rps, 1),
            "policy": policy, "finish_rate": round(statistics.median(fr), 4), "min": round(min(fr), 4),
            "max": round(max(fr), 4), "runs": [round(x, 4) for x in fr],
            "sim_finish_rate": round(statistics.median(sims), 4) if sims else None,
            "sim_runs": [round(x, 4) for x in sims], "run_ids": [r.get("run") for r in runs],
            # each run's longest gap between dispatches (ms): where the planner's loop stalled
            "loop_gap_ms": [r.get("loop_gap_ms") for r in runs],
            "unfinished": sum(r["unfinished"] for r in runs),
            # how the requests that missed ended, summed over the runs, live and simulated
            "lost": {k: sum(r.get(k, 0) for r in runs) for k in ("late", "expired", "rejected")},
            "sim_lost": {k: sum(r["sim"][k] for r in runs if r.get("sim")) for k in ("late", "expired", "rejected")}}


def verdict(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """ORLOJ against the best baseline per (model, load, deadline), and the simulator's error."""
    below, ahead_of_edf = 0, []
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for c in cells:
        groups.setdefault((c["model"], c["load"], c["deadline_ms"]), []).append(c)
    for key, cs in groups.items():
        mine = next((c for c in cs if c["policy"] == "orloj"), None)
        others = [c for c in cs if c["policy"] != "orloj"]
        if mine is None or not others:
            continue
        best = max(others, key=lambda c: c["finish_rate"])
        if mine["finish_rate"] < best["min"]:
            below += 1
        edf = next((c for c in others if c["policy"] == "edf"), None)
        if edf is not None and key[1] > 1.0:
            ahead_of_edf.append({"model": key[0], "load": key[1], "deadline_ms": key[2],
                                 "orloj_min": mine["min"], "edf_max": edf["max"],
                                 "beyond_spread": mine["min"] > edf["max"]})
    errs = [abs(c["sim_finish_rate"] - c["finish_rate"]) for c in cells if c["sim_finish_rate"] is not None]
    return {"orloj_below_best_baseline": below, "overload_vs_edf": ahead_of_edf,
            "orloj_paired": paired(groups),
            "sim_abs_error_max": round(max(errs), 4) if errs else None,
            "sim_within_0.05": sum(e <= 0.05 for e in errs), "sim_cells": len(errs)}


def paired(groups: dict[tuple[Any, ...], list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """ORLOJ minus each baseline, run by run (a repeat gives every policy the same arrivals and
    inputs), pooled over the cells below capacity (``light``) and above it (``overload``): the
    mean difference, wins and losses, and the two-sided sign test's p. A cell count against the
    best baseline's minimum flags ties often (with five baselines and three runs, a policy equal to
    all of them is below the best one's minimum in about a third of the cells); this does not."""
    from scipy.stats import binomtest

    diffs: dict[tuple[str, str], list[float]] = {}
    for (_, load, _), cs in groups.items():
        mine = next((c for c in cs if c["policy"] == "orloj"), None)
        if mine is None:
            continue
        for c in cs:
            if c["policy"] != "orloj":
                d = [a - b for a, b in zip(mine["runs"], c["runs"])]
                diffs.setdefault(("light" if load < 1.0 else "overload", c["policy"]), []).extend(d)
    out: dict[str, dict[str, Any]] = {}
    for (regime, policy), d in sorted(diffs.items()):
        wins, losses = sum(x > 0 for x in d), sum(x < 0 for x in d)
        p = binomtest(wins, wins + losses).pvalue if wins + losses else 1.0
        out.setdefault(regime, {})[policy] = {"mean": round(sum(d) / len(d), 4), "wins": wins, "losses": losses,
                                              "runs": len(d), "sign_p": round(float(p), 4)}
    return out


def plot(cells: list[dict[str, Any]], path: Path) -> Path:
    """Finish rate against load, one panel per (model, deadline): live solid with its spread,
    the calibrated simulator dashed, same colours."""
    from adaserve.bench.figures import panels, save

    keys = list(dict.fromkeys((c["model"], c["deadline_ms"]) for c in cells))
    policies = list(dict.fromkeys(c["policy"] for c in cells))
    fig, axes = panels(len(keys), cols=min(len(keys), 4), sharey=True)
    for ax, (model, dl) in zip(axes.flat, keys):
        for i, p in enumerate(policies):
            mine = sorted((c for c in cells if c["model"] == model and c["deadline_ms"] == dl and c["policy"] == p),
                          key=lambda c: c["load"])
            x = [c["load"] for c in mine]
            y = [c["finish_rate"] for c in mine]
            err = [[c["finish_rate"] - c["min"] for c in mine], [c["max"] - c["finish_rate"] for c in mine]]
            ax.errorbar(x, y, yerr=err, marker="o", color=f"C{i}", label=p, capsize=3)
            sim = [(c["load"], c["sim_finish_rate"]) for c in mine if c["sim_finish_rate"] is not None]
            if sim:
                ax.plot([a for a, _ in sim], [b for _, b in sim], "--", color=f"C{i}", alpha=0.6)
        ax.set_title(f"{model}, deadline {dl:g} ms")
        ax.set_xlabel("load (of the capacity at this deadline)")
        ax.set_ylim(0, 1.05)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("finish rate (dashed: simulator)")
    axes[0][0].legend(fontsize=7)
    return save(fig, axes, len(keys), path)
