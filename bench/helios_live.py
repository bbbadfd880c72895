"""The live part of ``adaserve bench helios``: the drifting stream through the real pipeline.

Per policy, a fresh pipeline in this process (an embedded server, the planner and one CPU worker
serving every candidate, in threads) receives the stream as one-prompt jobs arriving as a Poisson
stream, or in a closed loop (``in_flight`` jobs outstanding, the next sent when the oldest is
answered; the light load, as in the paper's Sec. 4.3): ``helios`` names the family;
``fixed-<model>-d<max>`` names a model (served whole, its default variant, in FIFO batches);
``static-<model>`` names it too and is served by its ``early-exit`` variant one prompt at a time
(the EE-LLM baseline). Every request carries the threshold as the runner's ``tau`` input, and the
worker advertises the memory budget. Figures come from the results the producer receives: tokens/s
over the run, time to first token (queueing plus the batch's prefill share), the model and depth of
every result, and HELIOS's switches from telemetry.
"""

from __future__ import annotations

import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from adaserve.broker.settings import load_settings


def early_exit_factory() -> Any:
    """Schedulers for ``static-<model>``: FIFO, one prompt per batch, the ``early-exit`` variant."""
    from adaserve.planner.baselines.fifo import FifoScheduler
    from adaserve.planner.core import Decision

    class EarlyExitOne(FifoScheduler):
        name = "static-early-exit"

        def next_batch(self, now: float, max_size: int) -> Decision:
            d = super().next_batch(now, 1)
            d.variant = "early-exit"
            return d

    return lambda model, profile: EarlyExitOne(batch=1)


def run_live(policy: str, family: str, texts: list[str], *, new: int, rate: float | None, seed: int, data_dir: Path,
             models: tuple[str, ...], params: Any, memory_mb: float | None = None,
             in_flight: int | None = None) -> dict[str, Any]:
    """``rate``: prompts/s offered (Poisson); or ``in_flight``: a closed loop with that many jobs
    outstanding, the next sent when the oldest one's result is back (one: the paper's setup)."""
    if (rate is None) == (in_flight is None):
        raise ValueError("give either a rate or in_flight")
    from adaserve.broker import Job, Keys, Request, Slo, Tensor, decode
    from adaserve.broker.events import BatchFinished, HeliosLoadedMore, HeliosSwitched
    from adaserve.broker.messages import Generation
    from adaserve.embedded import EmbeddedServer
    from adaserve.models import Vocabulary
    from adaserve.planner.config import PlannerConfig
    from adaserve.planner.service import Planner
    from adaserve.producers import Client
    from adaserve.workers import Worker, WorkerConfig

    if policy == "helios":
        target = family
    elif policy.startswith("static-"):
        target = policy[len("static-"):]
    else:
        target = policy[len("fixed-"):].rpartition("-d")[0]
    vocab = Vocabulary.of(models[0], data_dir)
    known = set(vocab.chars)
    with tempfile.TemporaryDirectory() as tmp, EmbeddedServer(Path(tmp), persist=False) as server:
        settings = load_settings(redis_url=server.local_url, namespace=f"hb-{uuid.uuid4().hex[:6]}", data_dir=data_dir)
        stop = threading.Event()
        worker = Worker(settings, WorkerConfig(pool="cpu", models=models, threads=1, name="w-helios", slots=2,
                                               memory_mb=int(memory_mb) if memory_mb else None))
        threads = [threading.Thread(target=worker.run, args=(stop,), daemon=True)]
        threads[0].start()
        if not worker.ready.wait(120):
            raise RuntimeError("the worker did not start")
        factory = early_exit_factory() if policy.startswith("static-") else None
        planner = Planner(settings, PlannerConfig(max_batch=32), helios=params, factory=factory)
        threads.append(threading.Thread(target=planner.run, args=(stop,), daemon=True))
        threads[1].start()
        tau = Tensor.from_numpy(np.array([params.tau], np.float32))
        gaps = (np.random.default_rng(seed).exponential(1.0 / rate, size=len(texts)) if rate
                else np.zeros(len(texts)))
        handles: list[Any] = []
        try:
            with Client(settings) as c:
                t0 = time.monotonic()
                due = t0
                for i, text in enumerate(texts):
                    if in_flight is not None and i >= in_flight:
                        handles[i - in_flight].result(600)  # the loop: wait for the oldest outstanding job
                    due += gaps[i]
                    pause = due - time.monotonic()
                    if pause > 0:
                        time.sleep(pause)
                    ids = vocab.encode("".join(ch if ch in known else " " for ch in text))
                    job = Job(id=f"hb-{i}-{uuid.uuid4().hex[:6]}", model=target, reply_to="x",
                              slo=Slo(deadline_ms=600_000, objective="throughput"),
                              requests=[Request(id="r0", kind="generate", inputs={"tokens": Tensor.from_numpy(ids), "tau": tau},
                                                generation=Generation(max_new_tokens=new))])
                    handles.append(c.submit(job))
                results = [h.result(600) for h in handles]
                span = time.monotonic() - t0
        finally:
            stop.set()
            for t in threads:
                t.join(30)
        r = planner.r
        evs = [decode(f[b"m"]) for _, f in r.xrange(Keys(settings.namespace).telemetry)]
    done = [res.results[0] for res in results if res.ok]
    served: dict[str, int] = {}
    ttft = []
    log_ppl = []  # each prompt's perplexity under what served it (the runner's prompt_ppl)
    for x in done:
        ppl = x.outputs.get("prompt_ppl")
        v = float(ppl.to_numpy().reshape(-1)[0]) if ppl is not None else float("nan")
        if np.isfinite(v) and v > 0:
            log_ppl.append(np.log(v))
        key = f"{x.model}@{x.exit}"
        served[key] = served.get(key, 0) + new
        ttft.append(((x.timings.queue_ms or 0.0) + (x.timings.exec_ms or 0.0) / new) / 1000.0)
    fins = [e for e in evs if isinstance(e, BatchFinished)]
    return {"policy": policy, "mean_batch": float(np.mean([e.size for e in fins])) if fins else None,
            "busy_s": sum(e.exec_ms for e in fins) / 1000.0, "completed": len(done), "prompts": len(texts), "seconds": span,
            "tokens_per_s": new * len(done) / span, "ttft_p50_s": float(np.percentile(ttft, 50)) if ttft else None,
            "ttft_p99_s": float(np.percentile(ttft, 99)) if ttft else None,
            "perplexity": float(np.exp(np.mean(log_ppl))) if log_ppl else None, "exits": dict(sorted(served.items())),
            "switches": sum(isinstance(e, HeliosSwitched) for e in evs),
            "loads": sum(isinstance(e, HeliosLoadedMore) for e in evs)}
