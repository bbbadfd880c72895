import json

from typer.testing import CliRunner

from adaserve.cli import app


def test_sim_prints_one_json_object_per_policy() -> None:
    res = CliRunner().invoke(app, ["sim", "--policy", "orloj,fifo", "--workload", "static", "--requests", "200", "--json"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    assert [r["policy"] for r in rows] == ["orloj", "fifo"]
    assert all(r["met"] + r["late"] + r["expired"] == r["requests"] for r in rows)


def test_sim_rejects_unknown_names() -> None:
    res = CliRunner().invoke(app, ["sim", "--workload", "nine-modal", "--requests", "10"])
    assert res.exit_code != 0
    res = CliRunner().invoke(app, ["sim", "--policy", "lottery", "--requests", "10"])
    assert res.exit_code != 0
