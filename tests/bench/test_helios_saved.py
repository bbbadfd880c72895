"""Saved HELIOS bench measurements: a plain round trip, and a replay that gives the run's figures."""

import json
from pathlib import Path

import numpy as np
import typer
from typer.testing import CliRunner

from adaserve.bench.cli import register
from adaserve.bench.helios_saved import load, save
from adaserve.bench.helios_trace import Costs, Trace


def test_traces_and_costs_come_back_as_they_were_without_pickle(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    tr = Trace("m", (1, 2), rng.integers(0, 3, (4, 3)), rng.random((4, 3, 2)) > 0.5, rng.random((4, 2)) + 1)
    c = Costs("m", {1: {1: 0.1, 4: 0.2}, 2: {1: 0.3, 4: 0.4}}, {1: {1: 0.01, 4: 0.02}, 2: {1: 0.03, 4: 0.04}},
              {1: 0.5, 2: 0.6}, {1: 100, 2: 200}, {1: 8, 2: 16}, 64, {"a": 0.7}, {"a": 0.07})
    save(tmp_path, {"m": tr}, {"m": c}, ["a", "a", "b", "b"])
    traces, costs, tasks = load(tmp_path)
    assert tasks == ["a", "a", "b", "b"] and costs == {"m": c}
    got = traces["m"]
    assert got.exits == (1, 2)
    for a in ("exit_at_tau", "agree", "ppl"):
        assert np.array_equal(getattr(got, a), getattr(tr, a))
    with np.load(tmp_path / "traces.npz") as arr:  # plain arrays only
        assert all(arr[k].dtype != object for k in arr.files)


def _bench(app: typer.Typer, *extra: str) -> dict:
    res = CliRunner().invoke(app, ["bench", "helios", "--json", "--prompts", "40", "--seeds", "1", "--repeats", "1",
                                   "--live-rates", "", *extra])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_a_replay_of_saved_measurements_gives_the_same_figures(tmp_path: Path) -> None:
    app = typer.Typer()
    register(app)
    png = str(tmp_path / "h.png")
    first = _bench(app, "--save-measured", str(tmp_path / "m"), "--plot", png)
    again = _bench(app, "--measured", str(tmp_path / "m"), "--plot", png)
    assert again["costs"] == first["costs"]
    for load_ in first["loads"]:
        assert again["loads"][load_]["policies"]["helios"] == first["loads"][load_]["policies"]["helios"]
        assert again["loads"][load_]["throughput_vs_best_fixed"] == first["loads"][load_]["throughput_vs_best_fixed"]
    # another stream than the one measured is refused, not replayed on the wrong traces
    res = CliRunner().invoke(app, ["bench", "helios", "--json", "--prompts", "60", "--seeds", "1", "--live-rates", "",
                                   "--measured", str(tmp_path / "m"), "--plot", png])
    assert res.exit_code != 0
    assert isinstance(res.exception, ValueError) and "another stream" in str(res.exception)
