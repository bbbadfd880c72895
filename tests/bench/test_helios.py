"""`adaserve bench helios` on a short stream: the JSON keys the issue names, per load, from the
simulator and the live pipeline, and the plot."""

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from adaserve.bench.cli import register

KEYS = {"throughput_vs_best_static", "throughput_vs_best_fixed", "perplexity_vs_best_static",
        "energy_vs_best_static", "ttft_vs_best_static"}


def test_json_has_the_ratios_per_load_every_policy_and_a_plot(tmp_path: Path) -> None:
    app = typer.Typer()
    register(app)
    png = tmp_path / "h.png"
    res = CliRunner().invoke(app, ["bench", "helios", "--json", "--prompts", "40", "--seeds", "1", "--repeats", "1",
                                   "--live-rates", "200", "--plot", str(png)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert set(out["loads"]) == {"light", "near_saturation", "overload"}
    # light load is the paper's closed loop (one prompt in flight), the others are offered rates
    assert out["loads"]["light"]["in_flight"] == 1 and out["loads"]["light"]["arrival_rate_prompts_per_s"] is None
    assert out["loads"]["light"]["policies"]["fixed-ee-lm-s-d2"]["mean_batch"] == 1.0
    assert out["loads"]["overload"]["in_flight"] is None and out["loads"]["overload"]["arrival_rate_prompts_per_s"] > 0
    for cell in out["loads"].values():
        assert KEYS <= set(cell)
        assert all(cell[k] > 0 for k in KEYS)
        pol = cell["policies"]
        assert {"helios", "helios-no-switching", "helios-no-partial", "static-ee-lm-s", "static-ee-lm-xs", "static-ee-lm-code",
                "fixed-ee-lm-s-d1", "fixed-ee-lm-s-d4", "fixed-ee-lm-xs-d2", "fixed-ee-lm-code-d8"} <= set(pol)
        h = pol["helios"]
        assert {"tokens_per_s", "ttft_p50_s", "ttft_p99_s", "perplexity", "cpu_s_per_token", "mean_batch", "exits",
                "loads", "switches", "loaded_more", "breach_trips", "perplexity_by_task"} <= set(h)
        assert set(h["perplexity_by_task"]) == {"shakespeare", "python"}
        assert sum(h["exits"].values()) == 40 * out["new_tokens"]
    assert set(out["segments"]) == {"shakespeare", "python"} and out["tau"] == 0.4
    # the per-segment accuracy at equal depth (ee-lm-s and ee-lm-code share exits 2 and 4)
    assert {"2", "4"} <= set(out["best_whole_stream_at_depth"]) and isinstance(out["selection_matters"], list)
    live = out["live"]["light"]
    assert live["in_flight"] == 1 and live["helios"]["mean_batch"] == 1.0
    assert out["live"]["near_saturation"]["rate_prompts_per_s"] == 200
    assert live["helios"]["completed"] == 40 and live["throughput_vs_best_fixed_whole"] > 0
    # the static baseline live: the early-exit variant, one prompt at a time
    assert live["static-ee-lm-s"]["completed"] == 40 and live["static-ee-lm-s"]["mean_batch"] == 1.0
    assert live["throughput_vs_best_static"] > 0
    # live perplexity from the results' prompt_ppl: the live "best" policies are held to 5% of the most accurate
    assert all(live[p]["perplexity"] > 1.0 for p in ("helios", "static-ee-lm-s", "fixed-ee-lm-code-d8"))
    ppl = {p: live[p]["perplexity"] for p in live if isinstance(live[p], dict) and p.startswith("static-")}
    assert live[live["best_static"]]["perplexity"] <= 1.05 * min(ppl.values())
    assert sum(live["helios"]["exits"].values()) == 40 * out["new_tokens"]
    assert png.stat().st_size > 0
