"""``adaserve bench fuzz``: hostile entries at a running pipeline, valid jobs in between.

A planner and one CPU worker (fsdd-cnn) on a scratch namespace; the fuzzer's entries
(``loadgen/fuzz.py``) with one valid job of 4 requests every ``--valid-every`` entries. Printed
per kind: sent, rejected (every result it was owed came back ``rejected`` with a reason),
dead-lettered, unaccounted, wrong; the valid jobs' finish rate and p50 before and during the
fuzz; crashes (pipeline processes that exited) and each process's resident memory.
"""

from __future__ import annotations

import json
import os
from typing import Any

import typer

from adaserve.bench.cpu import memory_mb

MODEL = "fsdd-cnn"


def _rss_mib(pid: int) -> dict[str, float]:
    """Resident memory now and at its peak, MiB; empty for a process gone."""
    got = memory_mb(pid)
    return {} if got is None else {"rss_mib": round(got[0], 1), "peak_rss_mib": round(got[1], 1)}


def fuzz(
    entries: int = typer.Option(100_000, min=1, help="Hostile entries to send."),
    seed: int = typer.Option(1, help="Seed of the fuzzer (the same seed sends the same entries)."),
    valid_every: int = typer.Option(50, min=1, help="One valid job (4 requests) per this many hostile entries."),
    max_message_kib: int = typer.Option(
        256, min=64, help="ADASERVE_LIMIT_MAX_MESSAGE_BYTES of the run, KiB: the entries built to pass it are that "
                          "large, so the default 8 MiB would move gigabytes."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Send hostile entries mixed with valid traffic; check that everything is accounted for."""
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    from adaserve.bench.server import bench_settings
    from adaserve.broker import connect, load_limits
    from adaserve.broker.errors import AdaserveError
    from adaserve.loadgen.fuzz import Fuzzer
    from adaserve.loadgen.fuzz_run import FuzzRun
    from adaserve.models.datasets import sample_inputs
    from adaserve.stack import Stack

    # The children inherit these: the byte limit, and a short keep so consumed jobs leave the server.
    os.environ["ADASERVE_LIMIT_MAX_MESSAGE_BYTES"] = str(max_message_kib * 1024)
    os.environ["ADASERVE_CONSUMED_KEEP_S"] = "5"
    inputs, _ = sample_inputs(MODEL, 256, seed=seed)
    crashes = 0
    with bench_settings() as settings:
        stack = Stack(settings, cpu_workers=1, gpu_worker=False, worker_threads=1)
        with stack, Progress(transient=True, disable=as_json) as bar:
            stack.wait_ready()
            task = bar.add_task("hostile entries accounted for", total=entries)
            fuzzer = Fuzzer(seed, model=MODEL, inputs={"audio": ((1, 32, 32), "float32")},
                            reply_to="fuzz-" + settings.namespace, limits=load_limits())
            run = FuzzRun(stack.settings, fuzzer, model=MODEL, inputs=inputs, valid_every=valid_every,
                          alive=stack.check, progress=lambda n: bar.update(task, completed=n))
            try:
                report = run.run(entries).to_dict()
            except AdaserveError as exc:  # a pipeline process exited: the crash this bench looks for
                raise typer.BadParameter(f"the pipeline failed during the fuzz: {exc}") from None
            crashes = sum(proc.poll() is not None for _, proc in stack.children)
            memory: dict[str, Any] = {name: _rss_mib(proc.pid) for name, proc in stack.children}
            r = connect(stack.settings)
            info = r.info("memory")
            memory["server"] = {"used_mib": round(int(info["used_memory"]) / 2**20, 1),
                                "peak_mib": round(int(info["used_memory_peak"]) / 2**20, 1)}
            r.close()
    report.update(crashes=crashes, memory=memory, max_message_bytes=max_message_kib * 1024,
                  entries_per_s=round(entries / report["seconds"], 1) if report["seconds"] else 0.0)
    if as_json:
        print(json.dumps(report))
        return
    table = Table("kind", "sent", "rejected", "dead-lettered", "unaccounted", "wrong", "reasons")
    for kind, k in report["kinds"].items():
        table.add_row(kind, str(k["sent"]), str(k["rejected"]), str(k["dead_lettered"]), str(k["unaccounted"]),
                      str(k["wrong"]), ", ".join(f"{c} {n}" for c, n in sorted(k["reasons"].items())))
    console = Console(width=max(Console().width, 150))  # the reasons column, unwrapped, also in a log file
    console.print(table)
    vb, vd = report["valid_before"], report["valid_during"]
    console.print(f"{entries} hostile entries in {report['seconds']} s ({report['entries_per_s']}/s): "
                  f"{report['unaccounted']} unaccounted, {report['wrong']} wrong, {crashes} crashes"
                  f"{', STALLED' if report['stalled'] else ''}")
    console.print(f"valid traffic: finish rate {vb['finish_rate']} before (p50 {vb['p50_ms']} ms), "
                  f"{vd['finish_rate']} during (p50 {vd['p50_ms']} ms, {int(vd['requests'])} requests)")
    console.print("resident memory after the run (peak): " + "; ".join(
        f"{n} {m.get('rss_mib', m.get('used_mib'))} MiB ({m.get('peak_rss_mib', m.get('peak_mib'))})"
        for n, m in memory.items()))


def register(bench_app: typer.Typer) -> None:
    bench_app.command("fuzz")(fuzz)
