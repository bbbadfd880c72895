from adaserve.planner.sim.table import run_table


def test_cells_in_order_with_paper_values() -> None:
    seen = []
    cells, loads = run_table(["static"], [2.0, 3.0], ["orloj", "fifo"], requests=300, seeds=1, jobs=1,
                             progress=seen.append)
    assert [(c.slo, c.policy) for c in cells] == [(2.0, "orloj"), (2.0, "fifo"), (3.0, "orloj"), (3.0, "fifo")]
    assert len(seen) == 4 and set(loads) == {"static"} and 0 < loads["static"] < 1
    assert cells[0].paper == 0.48 and cells[1].paper is None
    j = cells[0].as_json()
    assert set(j) == {"workload", "slo", "policy", "finish_rate", "paper"} and 0 <= j["finish_rate"] <= 1
