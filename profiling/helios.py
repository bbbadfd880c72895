"""Measuring a candidate's HELIOS profile (``models.lm.helios_profile.HeliosProfile``) on this host
(``adaserve profile helios``), through the serving runner (``LmRunner``) a worker uses.

Timings are medians of ``repeats`` runs after one warm-up, one intra-op thread (as a worker runs
these models), greedy generation of ``new_tokens`` from ``prompt_tokens``-character held-out prompts
of both tasks. Perplexities come from the manifest (the build scored every exit on each task's
whole held-out tail); exit shares and Insight 1 from ``insight`` on ``windows`` windows per task.
"""

from __future__ import annotations

import json
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from adaserve.models.lm.corpus import TASKS, load_task
from adaserve.models.lm.helios_profile import (
    BATCH_SIZES,
    DepthProfile,
    EarlyExitProfile,
    HeliosProfile,
    TaskFigures,
)
from adaserve.models.lm.insight import Verdicts, exit_share, unchanged_share, verdicts
from adaserve.models.lm.prompts import pad_prompts
from adaserve.models.manifest import ModelInfo, VariantInfo

if TYPE_CHECKING:
    from adaserve.workers.runtime.lm import LmRunner


def mixed_prompts(n: int, length: int, seed: int) -> np.ndarray:
    """``n`` held-out prompts, alternating the tasks, as the runner's tokens [n, length]."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        val = load_task(list(TASKS)[i % len(TASKS)]).val
        s = int(rng.integers(0, len(val) - length))
        rows.append(val[s:s + length])
    return pad_prompts(rows, length)


def measure_profile(model_dir: Path, info: ModelInfo, *, tau: float = 0.8, repeats: int = 5,
                    prompt_tokens: int = 32, new_tokens: int = 16, windows: int = 64, rss: bool = True,
                    on_step: Callable[[str], None] | None = None) -> HeliosProfile:
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        say = on_step or (lambda _: None)
        say("exit verdicts")
        v = {t: verdicts(model_dir, load_task(t).val, windows) for t in TASKS}
        depths = []
        for variant in (x for x in info.variants if not x.extra.get("early_exit")):
            say(f"depth {variant.extra['depth']}")
            depths.append(_depth(model_dir, info, variant, v, tau=tau, repeats=repeats, rss=rss,
                                 prompt_tokens=prompt_tokens, new_tokens=new_tokens))
        early = next((x for x in info.variants if x.extra.get("early_exit")), None)
        if early is not None:
            say("early exit")
        static = None if early is None else _early(model_dir, info, early, tau=tau, repeats=repeats,
                                                   prompt_tokens=prompt_tokens, new_tokens=new_tokens)
    finally:
        torch.set_num_threads(threads)
    return HeliosProfile(name=info.name, family=info.family, tau=tau, host=platform.platform(),
                         device="cpu", prompt_tokens=prompt_tokens, new_tokens=new_tokens,
                         repeats=repeats, depths=depths, early_exit=static)


def _speeds(runner: LmRunner, *, repeats: int, prompt_tokens: int, new_tokens: int
            ) -> tuple[dict[str, float], dict[str, float], float, float]:
    """Tokens per wall and per CPU second at each batch size, time to first token and CPU seconds
    per token at batch 1 (medians of ``repeats`` after a warm-up)."""
    tps, tpc = {}, {}
    for b in BATCH_SIZES:
        prompts = mixed_prompts(b, prompt_tokens, seed=b)
        runner.generate(prompts, new_tokens)  # warm-up
        runs = [_timed(runner.generate, prompts, new_tokens) for _ in range(repeats)]
        tps[str(b)] = round(b * new_tokens / statistics.median(w for w, _ in runs), 2)
        tpc[str(b)] = round(b * new_tokens / max(statistics.median(c for _, c in runs), 1e-9), 2)
    one = mixed_prompts(1, prompt_tokens, seed=1)
    ttft = statistics.median(_timed(runner.generate, one, 1)[0] for _ in range(repeats))
    cpu = statistics.median(_timed(runner.generate, one, new_tokens)[1] for _ in range(repeats))
    return tps, tpc, round(ttft, 6), round(cpu / new_tokens, 7)


def _early(model_dir: Path, info: ModelInfo, variant: VariantInfo, *, tau: float, repeats: int,
           prompt_tokens: int, new_tokens: int) -> EarlyExitProfile:
    """The static per-token early-exit baseline: its speed, and the mean exit its tokens take per
    task (a batch of 16 held-out prompts, alternating the tasks)."""
    from adaserve.workers.runtime.lm import LmRunner

    runner = LmRunner(model_dir, info, variant, "cpu", threads=1)
    runner.tau = tau
    tps, tpc, ttft, cpu = _speeds(runner, repeats=repeats, prompt_tokens=prompt_tokens, new_tokens=new_tokens)
    g = runner.decode(mixed_prompts(16, prompt_tokens, seed=16), new_tokens)
    mean_exit = {t: round(float(g.exits[i::len(TASKS)].mean()), 4) for i, t in enumerate(TASKS)}
    return EarlyExitProfile(depth=runner.depth, tokens_per_s=tps, tokens_per_cpu_s=tpc, ttft_s=ttft,
                            cpu_s_per_token=cpu, mean_exit=mean_exit)


def _depth(model_dir: Path, info: ModelInfo, variant: VariantInfo, v: dict[str, Verdicts], *, tau: float,
           repeats: int, rss: bool, prompt_tokens: int, new_tokens: int) -> DepthProfile:
    from adaserve.workers.runtime.lm import LmRunner

    k = int(variant.extra["depth"])
    loads = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        runner = LmRunner(model_dir, info, variant, "cpu", threads=1)
        loads.append(time.perf_counter() - t0)
    tps, tpc, ttft, cpu = _speeds(runner, repeats=repeats, prompt_tokens=prompt_tokens, new_tokens=new_tokens)
    tasks = {}
    for t, x in v.items():
        j = x.depths.index(k)
        same, _ = unchanged_share(x.conf[j], x.pred[j], x.pred[-1], tau)
        tasks[t] = TaskFigures(perplexity=float(variant.extra["perplexity"][t]),
                               exit_share=round(exit_share(x.conf, x.depths, tau)[k], 4),
                               breach_share=round(float(np.mean(x.conf[j] < tau)), 4),
                               unchanged=None if np.isnan(same) else round(same, 4))
    mem = _rss(model_dir, k) if rss else {}
    return DepthProfile(
        depth=k, tokens_per_s=tps, tokens_per_cpu_s=tpc, ttft_s=ttft, weight_bytes=runner.weight_bytes,
        kv_bytes_per_token=runner.kv_bytes_per_token, load_s=round(statistics.median(loads), 6),
        cpu_s_per_token=cpu,
        rss_weights_bytes=mem["loaded"] - mem["base"] if mem else None,
        rss_batch16_bytes=mem["after_batch"] - mem["loaded"] if mem else None,
        tasks=tasks)


def _timed(fn: Callable[..., object], *args: object) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) of one call."""
    w, c = time.perf_counter(), time.process_time()
    fn(*args)
    return time.perf_counter() - w, time.process_time() - c


def _rss(model_dir: Path, depth: int, batch: int = 16) -> dict[str, int]:
    out = subprocess.run([sys.executable, "-m", "adaserve.profiling.helios_rss", str(model_dir), str(depth), str(batch)],
                         capture_output=True, text=True, timeout=300, check=True)
    return {k: int(x) for k, x in json.loads(out.stdout.strip().splitlines()[-1]).items()}
