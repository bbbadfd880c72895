"""``adaserve top``'s screen at 80 columns: every row there, no line wider, no figure cut short."""

from __future__ import annotations

import re

from rich.console import Console

from adaserve.telemetry.render_top import screen
from adaserve.telemetry.top import Dashboard, ModelRow, PoolRow, WorkerRow


def crowded() -> Dashboard:
    """Long names and wide figures, where a naive table would cut cells to ``58…``."""
    models = [ModelRow(
        model=name, queued=123456, running=4096, arrival_rps=15523.4, done_rps=15498.7, ended=987654,
        on_time=900000, slo_violations=87654, finish_rate=0.911, p50_ms=1234.5, p99_ms=98765.4,
        variants={"depth2-int8-experimental": 60, "depth4": 30, "depth6": 5, "full": 5},
        exits={"1": 50, "2": 30, "3": 20}, placements={"gpu (part 1)": 70, "gpu>cpu": 20, "cpu": 10},
    ) for name in ("av-digits", "ee-audio-with-a-very-long-model-name-indeed", "effnet-lite0")]
    pools = [PoolRow(pool=p, workers=16, slots=512, busy=511, batches_per_s=4321.9, rps=155234.5,
                     mean_batch=31.9, exec_p50_ms=1234.5) for p in ("cpu", "gpu-h100-pool-number-one")]
    workers = [WorkerRow(worker=f"worker-{i}-on-host-gpu-node-{i:03d}.cluster.example", pool="gpu", device="gpu",
                         slots=64, busy=63, batches_per_s=999.9, rps=31234.5, util_pct=100.0, power_w=699.9,
                         seen_s=1234.5) for i in range(3)]
    return Dashboard(now_ms=1_700_000_000_000, window_s=10.0, span_s=9.5, events=1234567, models=models,
                     pools=pools, workers=workers)


def rendered(d: Dashboard) -> str:
    console = Console(record=True, width=80, color_system=None)
    console.print(screen(d, "ada"))
    return console.export_text()


def test_every_row_fits_80_columns_with_figures_whole() -> None:
    text = rendered(crowded())
    lines = text.splitlines()
    assert max(map(len, lines)) <= 80
    assert "…" not in text
    for figure in ("123456", "4096", "15523.4", "15498.7", "0.911", "87654", "1234.5", "98765.4",
                   "511/512", "4321.9", "155234.5", "31.9", "63/64", "999.9", "31234.5", "100", "700"):
        assert re.search(rf"(?<![\d.]){re.escape(figure)}(?![\d.])", text), figure
    assert "1234567 events" in text and "rates over 9.5 s" in text
    # every model, pool and worker has its row; a long name folds onto the next lines of its
    # column (the first), so the first words of the lines spell it out whole
    firsts = "".join(line.split()[0] for line in lines if line.strip())
    for name in ("av-digits", "ee-audio-with-a-very-long-model-name-indeed", "effnet-lite0", "cpu",
                 "gpu-h100-pool-number-one", *(f"worker-{i}-on-host-gpu-node-{i:03d}.cluster.example" for i in range(3))):
        assert name in firsts, name
    assert text.count("155234.5") == 2 and text.count("31234.5") == 3


def test_plan_mix_shows_shares() -> None:
    flat = re.sub(r"\s+", " ", rendered(crowded()))
    assert "1 50%, 2 30%, 3 20%" in flat
    assert "depth6 5%, +1" in flat and "more 5%" in flat  # the fourth variant summed up


def test_an_empty_window_says_so() -> None:
    d = Dashboard(now_ms=0, window_s=10.0, span_s=10.0, events=0, models=[], pools=[], workers=[])
    assert "no load and no worker in the window" in rendered(d)
