"""`adaserve bench orloj` on a tiny table: the JSON shape the issue asks for, the summary and the plot."""

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from adaserve.bench.cli import register


def test_json_has_cells_loads_summary_and_a_plot(tmp_path: Path) -> None:
    app = typer.Typer()
    register(app)
    png = tmp_path / "p.png"
    res = CliRunner().invoke(app, ["bench", "orloj", "--json", "--workloads", "static", "--policies", "orloj,fifo",
                                   "--requests", "150", "--seeds", "1", "--jobs", "1", "--plot", str(png)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert set(out) == {"cells", "offered_load", "summary"}
    assert len(out["cells"]) == 10 and 0 < out["offered_load"]["static"] < 1
    cell = out["cells"][0]
    assert {"workload", "slo", "policy", "finish_rate", "paper", "margin"} <= set(cell)
    vb = out["summary"]["orloj_vs_baselines"]
    assert vb["above"] + vb["tie"] + vb["below"] == 4  # ORLOJ's cells from 2x P99 up
    assert png.stat().st_size > 0


def test_a_bad_workload_is_a_usage_error(tmp_path: Path) -> None:
    app = typer.Typer()
    register(app)
    res = CliRunner().invoke(app, ["bench", "orloj", "--workloads", "nine-modal", "--plot", str(tmp_path / "x.png")])
    assert res.exit_code != 0
