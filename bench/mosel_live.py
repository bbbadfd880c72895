"""The live part of ``adaserve bench mosel``: real jobs of a multimodal model through the whole pipeline.

Per modality policy one fresh pipeline (embedded server unless ``ADASERVE_REDIS_URL``, the
planner, one CPU worker) serves the same jobs: arrivals replayed from the Azure trace scaled to
each offered rate, sizes ~ Normal(16, 6) clipped to 1..32, floors uniform over the model's
accuracy range, its held-out inputs (audio-image pairs, audio-video clips), one deadline for every
job. The planner selects modalities from the same profile the simulator uses (it is put into Redis first).
Figures come from the results the producer receives: deadlines met, completion times, each job's
planned effective accuracy (``job_accuracy``) against its floor, the subset of every request
(``plan.variant``) and the predictions against the labels.
"""

from __future__ import annotations

import math
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from adaserve.planner.mosel.workload import WorkloadSpec, arrival_times

ACC_TOL = 1e-9


@dataclass(frozen=True)
class LiveConfig:
    rates: tuple[float, ...] = (50.0, 100.0, 150.0)
    seconds: float = 10.0
    deadline_ms: float = 100.0
    policies: tuple[str, ...] = ("optimized", "random", "aggressive", "none")
    seed: int = 0
    grace_s: float = 5.0
    threads: int = 1
    spec: WorkloadSpec = field(default_factory=WorkloadSpec)
    model: str = "av-digits"


@dataclass(frozen=True)
class LiveJob:
    offset_s: float
    size: int
    floor: float
    picks: tuple[int, ...]  # indices into the input pool
    deadline_ms: float = 0.0  # 0: the run's deadline


def plan_jobs(cfg: LiveConfig, rate: float, acc_range: tuple[float, float], pool_n: int,
              gaps: np.ndarray | None, alone_ms: Callable[[int], float] | None = None) -> list[LiveJob]:
    """The jobs of one run; a pure function of the config and the rate (same for every policy).

    With ``alone_ms`` (a job size's all-modality latency), a job's deadline is ``slo_mult`` x that,
    as in the simulator, but never under ``cfg.deadline_ms``: the pipeline's own latency is a
    floor the profile does not see."""
    n = max(1, int(round(rate * cfg.seconds)))
    times = arrival_times(gaps, rate, n, cfg.seed)
    rng = np.random.default_rng(cfg.seed + 1)
    sizes = np.clip(np.rint(rng.normal(cfg.spec.size_mean, cfg.spec.size_std, n)), 1, cfg.spec.max_size).astype(int)
    floors = rng.uniform(acc_range[0], acc_range[1], n)
    out, k = [], 0
    for t, size, f in zip(times, sizes, floors):
        deadline = max(cfg.deadline_ms, cfg.spec.slo_mult * alone_ms(int(size))) if alone_ms else 0.0
        out.append(LiveJob(float(t - times[0]), int(size), float(f),
                           tuple((k + j) % pool_n for j in range(size)), deadline))
        k += int(size)
    return out


def drive(settings: Any, jobs: list[LiveJob], pool: list[dict[str, np.ndarray]], deadline_ms: float,
          run: str, grace_s: float, model: str = "av-digits") -> tuple[list[Any], dict[str, LiveJob], float]:
    """Submit ``jobs`` at their offsets, collect every result; returns (results, job by id, span s)."""
    from adaserve.producers import Client, make_job

    by_id: dict[str, LiveJob] = {}
    got: list[Any] = []
    with Client(settings, read_block_ms=20) as client:
        t0 = time.monotonic()
        offsets = np.array([j.offset_s for j in jobs])
        sent = 0
        while sent < len(jobs):
            due = int(np.searchsorted(offsets, time.monotonic() - t0, side="right"))
            batch = []
            for j in jobs[sent:due]:
                job = make_job(model, [pool[i] for i in j.picks], j.deadline_ms or deadline_ms,
                               min_accuracy=j.floor, run=run)
                by_id[job.id] = j
                batch.append(job)
            if batch:
                client.submit_many(batch)
                sent = due
            wait = max(0.0, min(offsets[sent] - (time.monotonic() - t0) if sent < len(jobs) else 0.0, 0.05))
            if client.outstanding:
                got.extend(client.poll(wait))
            else:
                # ``poll`` returns at once when no job is outstanding: waiting in it for the next
                # arrival spun this process at a quarter of a core whenever the pipeline kept up,
                # CPU the worker lost on a 2-core machine, most under the policies that keep up best.
                time.sleep(wait)
        end = time.monotonic() + grace_s
        while client.outstanding and time.monotonic() < end:
            got.extend(client.poll(0.1))
        span = time.monotonic() - t0
    return got, by_id, span


def end_state(res: Any) -> str:
    """How a job ended: ``met`` its deadline, ``late`` (every request completed, after it),
    ``expired`` (the planner ended requests that could not finish in time), ``refused``
    (admission control: ``overloaded``), or ``other`` (any other reason a request did not complete)."""
    if res.deadline_met:
        return "met"
    if res.ok:
        return "late"
    why = " ".join(res.reasons)
    if why.startswith("overloaded") or " overloaded" in why:
        return "refused"
    return "expired" if "deadline" in why else "other"


def figures(results: list[Any], by_id: dict[str, LiveJob], labels: np.ndarray, span_s: float) -> dict[str, Any]:
    """SLO violations, throughput, completion times, accuracy (planned and measured), subsets."""
    n = len(by_id)
    met = [r for r in results if r.deadline_met]
    acc: list[float] = []
    floor_violations = unplanned = correct = predicted = below_measured = 0
    subsets: Counter[str] = Counter()
    for res in results:
        job = by_id[res.job_id]
        done = [(q, lab) for q, lab in zip(res.results, (labels[i] for i in job.picks)) if q.status == "completed"]
        if not done:
            continue
        planned = next((q.job_accuracy for q, _ in done if q.job_accuracy is not None), None)
        if planned is None:
            unplanned += 1
        else:
            acc.append(planned)
            floor_violations += planned < job.floor - ACC_TOL
        subsets.update(q.plan.variant for q, _ in done if q.plan is not None)
        hits = sum(int(q.prediction == lab) for q, lab in done)
        correct, predicted = correct + hits, predicted + len(done)
        below_measured += hits / len(done) < job.floor
    jct = [r.latency_ms for r in results if r.completed]
    ends = Counter(end_state(r) for r in results)
    ends["no_result"] = n - len(results)
    # From submission until the planner dispatched the job's first request: the time a job spent
    # in the planner (admission, the monitor's gate, the queue), of the jobs that were dispatched.
    waits = [min(d) for d in ([q.timings.dispatched_ms - q.timings.submitted_ms for q in r.results
                               if q.timings.dispatched_ms is not None] for r in results) if d]
    def pct(xs, q):
        return (float(np.percentile(xs, q)) if xs else None)
    return {
        "stages_ms": stages(results),
        "jobs": n, "results": len(results), "deadline_met": len(met),
        "slo_violation_ratio": 1.0 - len(met) / n if n else None,
        "throughput_jobs_s": len(met) / span_s, "throughput_requests_s": sum(len(r.results) for r in met) / span_s,
        "statuses": dict(sum((Counter(r.counts) for r in results), Counter())),
        "jct_ms": {f"p{q}": pct(jct, q) for q in (50, 95, 99)},
        "dispatch_wait_ms": {f"p{q}": pct(waits, q) for q in (50, 95)},
        "end_states": dict(ends),
        "accuracy": {**{f"p{q}": pct(acc, q) for q in (5, 25, 50, 75, 95)},
                     "mean": float(np.mean(acc)) if acc else None, "min": min(acc) if acc else None},
        "floor_violations": int(floor_violations),
        "jobs_without_planned_accuracy": unplanned,
        "measured_accuracy": correct / predicted if predicted else None,
        "jobs_measured_below_floor": int(below_measured),
        "requests_by_subset": dict(subsets),
    }


def stages(results: list[Any]) -> dict[str, Any]:
    """Where a job's time went, per job from its requests' timings (ms since submission): ``wait``
    until the planner dispatched its first request, ``run`` from then until the worker finished
    its last one (batches of this and other jobs, transit to the worker included), and its
    ``deadline``; for all jobs that completed and for the late ones. (A result's latency is its
    worker's finish, so the way back to the producer is not in these timings.)"""
    rows: dict[str, list[tuple[float, float, float]]] = {"completed": [], "late": []}
    for r in results:
        if not r.completed:
            continue
        ts = r.results
        disp = [q.timings.dispatched_ms - q.timings.submitted_ms for q in ts if q.timings.dispatched_ms is not None]
        fin = max(q.timings.finished_ms - q.timings.submitted_ms for q in ts)
        if not disp:
            continue
        row = (min(disp), fin - min(disp), float(r.deadline_ms))
        rows["completed"].append(row)
        if not r.deadline_met:
            rows["late"].append(row)
    out: dict[str, Any] = {}
    for kind, xs in rows.items():
        if not xs:
            out[kind] = {"jobs": 0}
            continue
        a = np.array(xs)
        out[kind] = {"jobs": len(xs), **{f"{name}_p{q}": float(np.percentile(a[:, k], q))
                                          for k, name in enumerate(("wait", "run", "deadline"))
                                          for q in (50, 95)}}
    return out


def telemetry(settings: Any, since_ms: float, costs: Any) -> dict[str, Any]:
    """What the telemetry stream says since ``since_ms``: ``planner.replanned`` events, and per
    subset the batches run, their execution time and what the profile predicted for them (how
    well the planner's latency model fits the live worker)."""
    from adaserve.broker import Keys, connect, decode
    from adaserve.broker.events import BatchFinished, PlannerReplanned

    r = connect(settings)
    replans = 0
    by: dict[str, dict[str, float]] = {}
    points: dict[str, list[tuple[int, float]]] = {}
    try:
        for _, f in r.xrange(Keys(settings.namespace).telemetry, min=f"{int(since_ms)}"):
            try:
                ev = decode(f[b"m"])
            except Exception:
                continue
            replans += isinstance(ev, PlannerReplanned)
            if isinstance(ev, BatchFinished) and ev.variant in costs.subsets:
                cell = by.setdefault(ev.variant, {"batches": 0, "requests": 0, "exec_ms": 0.0, "profile_ms": 0.0})
                cell["batches"] += 1
                cell["requests"] += ev.size
                cell["exec_ms"] += ev.exec_ms
                cell["profile_ms"] += costs.run_ms(costs.subsets.index(ev.variant), ev.size)
                points.setdefault(ev.variant, []).append((ev.size, ev.exec_ms))
    finally:
        r.close()
    ratios = {v: c["exec_ms"] / c["profile_ms"] if c["profile_ms"] else None for v, c in by.items()}
    out: dict[str, dict[str, Any]] = {v: {**c, "exec_over_profile": ratios[v], **batch_fit(points[v], costs, v)}
                                      for v, c in by.items()}
    return {"replanned_events": replans, "batches_by_subset": out}


def batch_fit(points: list[tuple[int, float]], costs: Any, subset: str) -> dict[str, Any]:
    """Live batch time against batch size: a line ``fixed + per_request x size`` fitted to the
    batches, the profile's line beside it, and the median live/profile ratio by batch size, so a
    misfit that is a fixed cost per batch (small batches worst) shows apart from a per-request one."""
    m = costs.subsets.index(subset)
    sizes = np.array([k for k, _ in points], dtype=float)
    ms = np.array([v for _, v in points])
    prof = np.array([costs.run_ms(m, int(k)) for k in sizes])
    fit: dict[str, Any] = {}
    if len(set(sizes.tolist())) > 1:
        per, fixed = np.polyfit(sizes, ms, 1)
        fit["live_fit"] = {"fixed_ms": float(fixed), "per_request_ms": float(per)}
    pper, pfixed = np.polyfit(np.arange(1, costs.max_batch + 1), costs.batch_ms[m], 1)
    fit["profile_fit"] = {"fixed_ms": float(pfixed), "per_request_ms": float(pper)}
    bands = {"1-4": (1, 4), "5-16": (5, 16), "17-32": (17, 32)}
    fit["ratio_by_size"] = {}
    for name, (lo, hi) in bands.items():
        sel = (sizes >= lo) & (sizes <= hi) & (prof > 0)
        if sel.any():
            fit["ratio_by_size"][name] = {"batches": int(sel.sum()), "p50": float(np.median(ms[sel] / prof[sel]))}
    return fit


def cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) of process ``pid`` so far, from ``/proc``; None where there is none."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pipeline_pids(stack: Any) -> dict[str, int]:
    """The processes of one pipeline: its children, the server (its own ``process_id``), and this
    one (the producer that submits jobs and reads results)."""
    from adaserve.broker import connect

    pids = {name.split("-")[0]: proc.pid for name, proc in stack.children}
    r = connect(stack.settings)
    try:
        pids["server"] = int(r.info("server")["process_id"])
    finally:
        r.close()
    pids["producer"] = os.getpid()
    return pids


def cpu_snapshot(pids: dict[str, int]) -> dict[str, float]:
    out = {}
    for name, pid in pids.items():
        s = time.process_time() if pid == os.getpid() else cpu_seconds(pid)
        if s is not None:
            out[name] = s
    return out


def cpu_used(before: dict[str, float], after: dict[str, float], requests: int, span_s: float) -> dict[str, Any]:
    """Per process: CPU ms per offered request and the share of one core it held over the run."""
    used = {k: after[k] - before[k] for k in before if k in after}
    return {"ms_per_request": {k: 1e3 * v / max(requests, 1) for k, v in used.items()},
            "cores": {k: v / span_s for k, v in used.items()},
            "total_ms_per_request": 1e3 * sum(used.values()) / max(requests, 1)}


# A live pipeline label ``<policy>-shared`` runs ``<policy>`` with the latency correction the planner
# had before the per-subset one (one scale for every subset): the before/after of that change, side
# by side in one run.
SHARED_SUFFIX = "-shared"


def pipeline_policy(label: str) -> tuple[str, str]:
    """The planner's modality policy and latency correction (``subset`` or ``shared``) of a label."""
    if label.endswith(SHARED_SUFFIX):
        return label[: -len(SHARED_SUFFIX)], "shared"
    return label, "subset"


def ensure_matrix(settings: Any, profile: Any) -> None:
    """Solve the strategy matrix of ``profile`` into the planner's cache before any pipeline starts.

    The planner finds the profile in Redis (no file beside it), so without a cached matrix the
    first pipeline (the first policy) solves it on its monitor thread for seconds at start-up:
    its selection is off and the solver's CPU is taken from the worker during its runs."""
    from adaserve.planner.mosel.store import ProfileSource, build_cached_matrix, cached_matrix

    src = ProfileSource(profile, "bench", None)
    cache = settings.data_dir / "mosel"
    if cached_matrix(src, cache, max_size=32, step=0.01) is None:
        build_cached_matrix(src, cache, max_size=32, step=0.01)


def live(cfg: LiveConfig, profile: Any, gaps: np.ndarray | None, log_dir: Path,
         tick: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Every policy at every rate, ``profile`` put into Redis; one pipeline per policy, all started
    together and driven in turn (the order rotates from rate to rate), so that what else runs on
    the machine falls on every policy alike rather than on whichever ran first."""
    from contextlib import ExitStack

    from adaserve.bench.server import bench_settings
    from adaserve.broker import Keys, connect
    from adaserve.models.datasets import sample_inputs
    from adaserve.planner.mosel.costs import SubsetCosts
    from adaserve.planner.mosel.shell import CORRECTION_ENV
    from adaserve.stack import Stack

    costs = SubsetCosts.from_profile(profile)
    acc_range = (costs.min_accuracy, costs.max_accuracy)
    best = costs.richest

    def alone_ms(n: int) -> float:
        return costs.run_ms(best, n)

    pool, labels = sample_inputs(cfg.model, 512, seed=cfg.seed)
    runs: dict[str, list[dict[str, Any]]] = {p: [] for p in cfg.policies}
    with ExitStack() as ctx:
        stacks: dict[str, Any] = {}
        for policy in cfg.policies:
            settings = ctx.enter_context(bench_settings())
            ensure_matrix(settings, profile)
            r = connect(settings)
            r.set(Keys(settings.namespace).profile(cfg.model), profile.to_json())
            r.close()
            modality, correction = pipeline_policy(policy)
            # The planner reads its correction from the environment it is started with (the stack
            # copies this process's at start); set only around the start of this one pipeline.
            old = os.environ.get(CORRECTION_ENV)
            os.environ[CORRECTION_ENV] = correction
            try:
                stacks[policy] = ctx.enter_context(Stack(settings, cpu_workers=1, gpu_worker=False,
                                                         worker_threads=cfg.threads, modality=modality,
                                                         log_dir=log_dir / policy))
            finally:
                if old is None:
                    os.environ.pop(CORRECTION_ENV, None)
                else:
                    os.environ[CORRECTION_ENV] = old
        pids = {}
        for policy, stack in stacks.items():
            stack.wait_ready()
            warm = plan_jobs(LiveConfig(rates=(20.0,), seconds=1.0, seed=cfg.seed + 7), 20.0, acc_range, len(pool), gaps)
            drive(stack.settings, warm, list(pool), 1000.0, "warm", 5.0, cfg.model)
            pids[policy] = pipeline_pids(stack)
        for k, rate in enumerate(cfg.rates):
            jobs = plan_jobs(cfg, rate, acc_range, len(pool), gaps, alone_ms)
            order = cfg.policies[k % len(cfg.policies):] + cfg.policies[:k % len(cfg.policies)]
            for policy in order:
                stack = stacks[policy]
                since = time.time() * 1000.0
                before = cpu_snapshot(pids[policy])
                results, by_id, span = drive(stack.settings, jobs, list(pool), cfg.deadline_ms,
                                             f"{policy}-{rate:g}", cfg.grace_s, cfg.model)
                after = cpu_snapshot(pids[policy])
                stack.check()
                point = figures(results, by_id, labels, span)
                point.update(policy=policy, offered_jobs_s=rate, span_s=span,
                             cpu=cpu_used(before, after, sum(j.size for j in jobs), span),
                             **telemetry(stack.settings, since, costs))
                runs[policy].append(point)
                if tick:
                    tick(f"live {policy} @ {rate:g} jobs/s")
    return {"config": {"model": cfg.model, "rates": list(cfg.rates), "seconds": cfg.seconds, "deadline_ms": cfg.deadline_ms,
                       "deadline_rule": f"max({cfg.deadline_ms:g} ms, {cfg.spec.slo_mult:g}x all-modality latency)",
                       "size_mean": cfg.spec.size_mean, "size_std": cfg.spec.size_std, "max_size": cfg.spec.max_size,
                       "floors": list(acc_range), "cpu_workers": 1, "worker_threads": cfg.threads,
                       "arrivals": "Azure conversation trace replayed, scaled to each rate",
                       "order": "pipelines up together, driven in turn, order rotating by rate"},
            "runs": runs,
            "floor_violations": sum(p["floor_violations"] for pts in runs.values() for p in pts)}


def spread(repeats: list[dict[str, list[dict[str, Any]]]]) -> dict[str, dict[str, dict[str, list[float]]]]:
    """Per policy and offered rate, each repeat's violation ratio, throughput and median completion
    time, sorted (min first): how far apart runs of the same point land on this machine."""
    out: dict[str, dict[str, dict[str, list[float]]]] = {}
    for runs in repeats:
        for policy, points in runs.items():
            for p in points:
                cell = out.setdefault(policy, {}).setdefault(f"{p['offered_jobs_s']:g}", {
                    "slo_violation_ratio": [], "throughput_jobs_s": [], "jct_p50_ms": []})
                cell["slo_violation_ratio"].append(float(p["slo_violation_ratio"]))
                cell["throughput_jobs_s"].append(float(p["throughput_jobs_s"]))
                if p["jct_ms"]["p50"] is not None:
                    cell["jct_p50_ms"].append(float(p["jct_ms"]["p50"]))
    for cells in out.values():
        for cell in cells.values():
            for xs in cell.values():
                xs.sort()
    return out


def paired(repeats: list[dict[str, list[dict[str, Any]]]], baseline: str = "none") -> dict[str, dict[str, Any]]:
    """Each policy against ``baseline`` cell by cell (same repeat, same offered rate: the same jobs,
    run back to back): in how many cells it had fewer SLO violations and more throughput, and the
    median differences. On a shared machine the absolute figures drift with what else runs; the
    difference within a cell drifts far less, and ``sign_test_p`` is the chance of being ahead in
    at least as many cells if the two policies were alike (a one-sided sign test)."""
    out: dict[str, dict[str, Any]] = {}
    for runs in repeats:
        base = {p["offered_jobs_s"]: p for p in runs.get(baseline, [])}
        for policy, points in runs.items():
            if policy == baseline:
                continue
            for p in points:
                b = base.get(p["offered_jobs_s"])
                if b is None:
                    continue
                cell = out.setdefault(policy, {"cells": 0, "fewer_violations": 0, "more_throughput": 0,
                                               "violation_diffs": [], "throughput_ratios": []})
                dv = float(p["slo_violation_ratio"]) - float(b["slo_violation_ratio"])
                cell["cells"] += 1
                cell["fewer_violations"] += dv < 0
                cell["more_throughput"] += p["throughput_jobs_s"] > b["throughput_jobs_s"]
                cell["violation_diffs"].append(dv)
                if b["throughput_jobs_s"] > 0:
                    cell["throughput_ratios"].append(float(p["throughput_jobs_s"]) / float(b["throughput_jobs_s"]))
    for cell in out.values():
        cell["violation_diffs"].sort()
        cell["throughput_ratios"].sort()
        cell["median_violation_diff"] = float(np.median(cell["violation_diffs"])) if cell["violation_diffs"] else None
        cell["median_throughput_ratio"] = float(np.median(cell["throughput_ratios"])) if cell["throughput_ratios"] else None
        n, k = cell["cells"], cell["fewer_violations"]
        cell["sign_test_p"] = sum(math.comb(n, i) for i in range(k, n + 1)) / 2**n
    return out
