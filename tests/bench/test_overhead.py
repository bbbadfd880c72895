"""`adaserve bench overhead`: the JSON of a short real run has every figure, and they add up.

Nothing here asserts a timing: only that figures exist, are positive and consistent.
"""

import json
from pathlib import Path

import pytest

from adaserve.bench.overhead import HOPS, hops

from .conftest import bench_command

_invoke = bench_command("overhead")


def test_a_short_run_reports_each_process_cost_and_the_machine_load(
        redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADASERVE_REDIS_URL", redis_url)
    monkeypatch.setenv("ADASERVE_DATA_DIR", str(tmp_path))
    res = _invoke("--json", "--rounds", "1", "--seconds", "0.5", "--batch", "8", "--window", "2")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["pipeline_rps"] > 0 and out["direct_rps"] > 0
    assert out["throughput_ratio"] == pytest.approx(out["pipeline_rps"] / out["direct_rps"])
    cost = out["cpu_us_per_request"]
    for name in ("planner", "worker", "producer", "redis"):
        assert cost[name] > 0, name
    parts = ("planner", "worker_excl_model", "producer", "redis")
    assert cost["total_excl_model"] == pytest.approx(sum(cost[k] for k in parts), abs=0.3)
    assert out["redis_commands_per_request"] > 0
    assert len(out["load_avg_1m"]) == 2 and out["cores"] >= 1
    for name in ("planner", "worker", "producer"):
        mem = out["memory"][name]
        assert 0 < mem["rss_mb"] <= mem["peak_rss_mb"], name
    # one job alone: each part of its way took time, and the parts make up about the whole
    way = out["latency_hops_p50_ms"]
    assert list(way) == list(HOPS) and all(v > 0 for v in way.values())
    assert 0.5 * out["pipeline_batch_p50_ms"] < sum(way.values()) < 2.0 * out["pipeline_batch_p50_ms"]


def test_a_jobs_way_is_split_at_each_stamp() -> None:
    ways = [(0.0, 2.0, 3.5, 4.5, 6.0), (10.0, 13.0, 14.0, 16.0, 17.0), (20.0, 22.5, 24.0, 25.0, 26.5)]
    assert hops(ways) == {"to_planner": 2.5, "to_worker": 1.5, "in_worker": 1.0, "to_client": 1.5}
    assert hops([]) == {}


def test_hotpaths_times_every_piece_on_a_real_job() -> None:
    res = bench_command("hotpaths")("--json", "--batch", "4", "--repeats", "3", "--calls", "2")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout.strip().splitlines()[-1])
    pieces = out["us_per_request"]
    assert set(pieces) == {"job_submit", "job_decode", "job_submit_columns", "job_decode_columns",
                           "batch_build", "batch_build_columns", "batch_unpack", "batch_decode",
                           "batch_read", "batch_read_columns", "inputs_gather", "inputs_gather_columns",
                           "results_collect", "results_validate", "worker_rows", "worker_columns", "columns_collect"}
    for v in pieces.values():
        assert 0 < v["min"] <= v["median"] <= v["max"]
