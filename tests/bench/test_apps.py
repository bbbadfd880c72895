"""`adaserve bench apps`: its options, its arithmetic, and one short run on a real stack."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adaserve.bench import apps as apps_bench
from adaserve.bench import apps_losses
from adaserve.broker.codec import validate

from .conftest import bench_command


def test_apps_are_parsed_and_bad_ones_say_what_is_wrong() -> None:
    got = apps_bench.parse_apps(apps_bench.DEFAULT_APPS)
    assert [(a.name, a.max_new_tokens, a.deadline_ms, a.jobs_per_s) for a in got] == [
        ("short", 4, 60.0, 150.0), ("long", 32, 250.0, 20.0)]
    for bad, words in [("short:4:60", "name:tokens:deadline_ms:jobs_per_s"), ("a:x:60:1", "integer"),
                       ("a:4:0:1", "deadline_ms"), ("a:4:60:1,a:8:60:1", "distinct"), ("", "distinct"),
                       ("a b:4:60:1", "app names"), ("a:999:60:1", "tokens must be 1..256")]:
        with pytest.raises(ValueError, match=words):
            apps_bench.parse_apps(bad)


def test_cells_are_medians_and_orloj_is_paired_with_edf_repeat_by_repeat() -> None:
    def run(fr: float, short: float) -> dict[str, object]:
        return {"finish_rate": fr, "apps": {"short": short, "long": 1.0}, "unfinished": 0}

    cells = [apps_bench.summarise(25.0, "orloj", [run(0.6, 0.5), run(0.7, 0.6), run(0.5, 0.4)]),
             apps_bench.summarise(25.0, "edf", [run(0.5, 0.4), run(0.6, 0.5), run(0.55, 0.45)]),
             apps_bench.summarise(0.0, "orloj", [run(0.2, 0.1)] * 3)]
    assert (cells[0]["finish_rate"], cells[0]["min"], cells[0]["max"]) == (0.6, 0.5, 0.7)
    assert cells[0]["apps"] == {"short": 0.5, "long": 1.0}
    got = apps_bench.paired(cells)
    assert list(got) == ["25"]  # no EDF at 0: nothing to pair
    assert got["25"]["diffs"] == [0.1, 0.1, -0.05] and (got["25"]["wins"], got["25"]["losses"]) == (2, 1)


def _finished(bid: str, items: list[tuple[str, str, float]]) -> object:
    """A ``batch.finished`` of requests given as (run, status, total_ms)."""
    return validate({"v": 1, "type": "event", "event": "batch.finished", "ts": 1.0, "batch_id": bid, "pool": "cpu",
                     "worker": "w", "model": "m", "size": len(items), "exec_ms": 1.0,
                     "expired": sum(status == "expired" for _, status, _ in items),
                     "items": [{"job_id": f"j{k}", "request_id": "0", "app": run.split("-")[-1], "run": run,
                                "status": status, "queue_ms": 0.0, "exec_ms": 1.0, "total_ms": total}
                               for k, (run, status, total) in enumerate(items)]})


def test_what_became_of_each_apps_requests_and_how_batches_mixed_them() -> None:
    summary = {"submitted": 40, "completed": 30, "finish_rate": 0.5, "expired": 8, "rejected": 2, "unfinished": 0}
    assert apps_losses.lost(summary) == {"submitted": 40, "late": 10, "expired": 8, "rejected": 2, "unfinished": 0}
    runs, deadlines = {"t-short": "short", "t-long": "long"}, {"short": 60.0, "long": 250.0}
    events = [
        _finished("b1", [("t-short", "completed", 20.0), ("t-short", "completed", 70.0)]),  # short alone
        _finished("b2", [("t-short", "completed", 50.0), ("t-short", "completed", 90.0),    # mixed
                         ("t-long", "completed", 100.0)]),
        _finished("b3", [("t-short", "expired", 80.0), ("t-long", "completed", 120.0)]),    # one ran: not mixed
        _finished("b4", [("other-run", "completed", 1.0)]),                                 # another run's
    ]
    got = apps_losses.batch_mix(events, runs, deadlines)
    assert (got["batches"], got["mixed_batches"]) == (3, 1)
    assert got["apps"] == {"short": {"ran": 4, "mixed": 2, "mixed_in_time": 1},
                           "long": {"ran": 2, "mixed": 1, "mixed_in_time": 1}}
    run = {"finish_rate": 0.5, "apps": {"short": 0.4, "long": 1.0}, "unfinished": 0,
           "lost": {"short": apps_losses.lost(summary), "long": apps_losses.lost({**summary, "expired": 0})},
           "mix": got}
    cell = apps_bench.summarise(25.0, "orloj", [run, run])
    assert cell["lost"]["short"]["late"] == 20 and cell["mix"]["mixed_batches"] == 2
    assert cell["mix"]["apps"]["short"] == {"ran": 8, "mixed": 4, "mixed_in_time": 2}
    lines = apps_losses.explain(cell)
    assert lines[0] == ("short: 25% late, 20% expired, 5% refused; 50% of those that ran shared a batch with "
                        "another app, 50% of them in time")
    assert lines[1] == "long: 25% late, 0% expired, 5% refused; 50% of those that ran shared a batch with " \
                       "another app, 100% of them in time"
    # runs that predate the counts: the cell has none of them, and nothing to explain
    old = apps_bench.summarise(25.0, "edf", [{k: v for k, v in run.items() if k not in ("lost", "mix")}])
    assert "lost" not in old and apps_losses.explain(old) == []


def test_bad_options_are_usage_errors(tmp_path: Path) -> None:
    for args in (["--apps", "short:4"], ["--queue-ms", "-1"], ["--policies", "fastest"]):
        res = bench_command("apps")(*args, "--plot", str(tmp_path / "x.png"))
        assert res.exit_code == 2, (args, res.output)


@pytest.mark.slow
@pytest.mark.usefixtures("own_stack")
def test_two_apps_of_a_language_model_at_once_on_a_real_stack(tmp_path: Path) -> None:
    png = tmp_path / "apps.png"
    res = bench_command("apps")("--json", "--apps", "a:2:400:4,b:8:800:2", "--policies", "orloj,edf",
                                "--queue-ms", "25", "--repeats", "1", "--duration", "1", "--plot", str(png))
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert [(c["queue_ms"], c["policy"]) for c in out["cells"]] == [(25.0, "orloj"), (25.0, "edf")]
    for c in out["cells"]:
        assert c["finish_rate"] > 0.5 and set(c["apps"]) == {"a", "b"}  # a light load is served
        assert c["unfinished"] == 0
        # every request accounted for: what became of those that missed, and what ran in which batches
        for app in ("a", "b"):
            lost, mix = c["lost"][app], c["mix"]["apps"][app]
            assert lost["submitted"] > 0 and 0 < mix["ran"] <= lost["submitted"]
            assert lost["late"] + lost["expired"] + lost["rejected"] + lost["unfinished"] <= lost["submitted"]
        assert 0 < c["mix"]["batches"] and c["mix"]["mixed_batches"] <= c["mix"]["batches"]
        # the simulator, calibrated on the run, replays each app's jobs
        assert 0.0 <= c["sim_finish_rate"] <= 1.0 and set(c["sim_apps"]) == {"a", "b"}
    assert len(out["orloj_minus_edf"]["25"]["diffs"]) == 1
    assert png.stat().st_size > 0
