import json

from typer.testing import CliRunner

from adaserve.cli import app


def test_sim_prints_one_json_object_with_a_row_per_policy() -> None:
    res = CliRunner().invoke(app, ["sim", "--policy", "orloj,fifo", "--workload", "static", "--requests", "200", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["results"]
    assert [r["policy"] for r in rows] == ["orloj", "fifo"]
    assert all(r["met"] + r["late"] + r["expired"] == r["requests"] for r in rows)


def test_sim_rejects_unknown_names() -> None:
    res = CliRunner().invoke(app, ["sim", "--workload", "nine-modal", "--requests", "10"])
    assert res.exit_code != 0
    res = CliRunner().invoke(app, ["sim", "--policy", "lottery", "--requests", "10"])
    assert res.exit_code != 0


def test_calibrate_a_run_from_the_servers_telemetry_then_reuse_it(r, settings, tmp_path, monkeypatch,  # type: ignore[no-untyped-def]
                                                                    synthetic_run) -> None:
    from adaserve.broker import Keys
    from adaserve.broker.codec import FIELD, encode

    keys = Keys(settings.namespace)
    for ev in synthetic_run:  # run r1's events, as the planner and a worker publish them
        r.xadd(keys.telemetry, {FIELD: encode(ev)})
    monkeypatch.setenv("ADASERVE_REDIS_URL", settings.redis_url)
    monkeypatch.setenv("ADASERVE_NAMESPACE", settings.namespace)
    monkeypatch.setenv("ADASERVE_DATA_DIR", str(tmp_path))
    saved = tmp_path / "cal.json"
    res = CliRunner().invoke(app, ["sim", "--calibrate", "r1", "--calibration", str(saved), "--policy", "orloj,edf",
                                   "--rate", "50", "--duration", "2", "--deadline-ms", "50", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout.splitlines()[-1])["results"]
    assert [x["policy"] for x in rows] == ["orloj", "edf"] and all(x["model"] == "m" for x in rows)
    assert all(x["met"] + x["late"] + x["expired"] + x["rejected"] == x["requests"] for x in rows)
    again = CliRunner().invoke(app, ["sim", "--calibration", str(saved), "--policy", "edf", "--rate", "50",
                                     "--duration", "2", "--deadline-ms", "50", "--json"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout.splitlines()[-1])["results"] == [rows[1]]  # same seed, same calibration


def test_calibrating_an_unknown_run_is_a_usage_error(settings, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("ADASERVE_REDIS_URL", settings.redis_url)
    monkeypatch.setenv("ADASERVE_NAMESPACE", settings.namespace)
    res = CliRunner().invoke(app, ["sim", "--calibrate", "nope", "--calibration", str(tmp_path / "c.json")])
    assert res.exit_code != 0 and "no telemetry" in res.output
