import numpy as np
import pytest

from adaserve.planner.sim.table import Cell, compare, outcome, paired, run_table


def test_cells_in_order_with_paper_values() -> None:
    seen = []
    cells, loads = run_table(["static"], [2.0, 3.0], ["orloj", "fifo"], requests=300, seeds=1, jobs=1,
                             progress=seen.append)
    assert [(c.slo, c.policy) for c in cells] == [(2.0, "orloj"), (2.0, "fifo"), (3.0, "orloj"), (3.0, "fifo")]
    assert len(seen) == 4 and set(loads) == {"static"} and 0 < loads["static"] < 1
    assert cells[0].paper == 0.48 and cells[1].paper is None
    j = cells[0].as_json()
    assert set(j) == {"workload", "slo", "policy", "finish_rate", "paper"} and 0 <= j["finish_rate"] <= 1


def _cells(rates: dict[tuple[float, str], float], paper: dict[float, float] | None = None) -> list[Cell]:
    return [Cell("w", slo, p, v, (paper or {}).get(slo) if p == "orloj" else None, 0.0) for (slo, p), v in rates.items()]


def test_margins_and_outcomes_say_where_orloj_wins_ties_and_loses() -> None:
    cells = _cells({(1.5, "orloj"): 0.60, (1.5, "clipper"): 0.70,   # below, but under FROM_SLO: not counted
                    (2.0, "orloj"): 0.80, (2.0, "clipper"): 0.70, (2.0, "fifo"): 0.75,
                    (4.0, "orloj"): 0.999, (4.0, "clipper"): 0.998,  # a tie at the ceiling
                    (5.0, "orloj"): 0.90, (5.0, "clipper"): 0.95},
                   paper={1.5: 0.60, 2.0: 0.76, 4.0: 1.0, 5.0: 1.0})
    rows, summary = compare(cells)
    by = {(r["slo"], r["policy"]): r for r in rows}
    assert by[(2.0, "orloj")]["margin"] == pytest.approx(0.05) and by[(2.0, "orloj")]["outcome"] == "above"
    assert by[(2.0, "fifo")]["margin"] == pytest.approx(-0.05) and "outcome" not in by[(2.0, "fifo")]
    assert by[(4.0, "orloj")]["outcome"] == "tie" and by[(5.0, "orloj")]["outcome"] == "below"
    vb = summary["orloj_vs_baselines"]
    assert (vb["above"], vb["tie"], vb["below"]) == (1, 1, 1)
    assert vb["ties"] == [{"workload": "w", "slo": 4.0, "orloj": 0.999, "best_baseline": 0.998, "policy": "clipper",
                           "only_orloj_met": None, "only_baseline_met": None, "ceiling": True}]
    assert [b["slo"] for b in vb["below_cells"]] == [5.0]
    vp = summary["orloj_vs_paper"]
    assert (vp["cells"], vp["met"]) == (4, 3) and vp["misses"][0]["slo"] == 5.0
    assert vp["misses"][0]["short_by"] == pytest.approx(0.10)


def test_a_tie_below_the_ceiling_is_not_marked_as_nothing_to_win() -> None:
    _, summary = compare(_cells({(3.0, "orloj"): 0.801, (3.0, "nexus"): 0.799}))
    assert summary["orloj_vs_baselines"]["ties"][0]["ceiling"] is False
    assert outcome(0.0051) == "above" and outcome(-0.0051) == "below" and outcome(0.005) == "tie"


def test_a_given_load_replaces_the_papers_for_every_workload() -> None:
    cells, loads = run_table(["static", "two-modal"], [3.0], ["fifo"], requests=200, seeds=1, jobs=1, load=0.8)
    assert loads == {"static": 0.8, "two-modal": 0.8} and len(cells) == 2
    with pytest.raises(ValueError):
        run_table(["static"], [3.0], ["fifo"], requests=200, seeds=1, jobs=1, load=0.0)


def _bits(met: list[bool]) -> bytes:
    return np.packbits(np.array(met, dtype=bool)).tobytes()


def test_paired_counts_and_mcnemar_decide_with_per_request_results() -> None:
    n = 1000
    base = [True] * n
    orloj = Cell("w", 4.0, "orloj", 0.0, None, 0.0, (_bits(base),))
    # 30 requests only ORLOJ meets, 5 only the baseline: significant although the margin is 0.025
    a = base[:]
    for i in range(5):
        a[i] = False
    b = base[:]
    for i in range(100, 130):
        b[i] = False
    o, c = Cell("w", 4.0, "orloj", 0.995, None, 0.0, (_bits(a),)), Cell("w", 4.0, "nexus", 0.97, None, 0.0, (_bits(b),))
    assert paired(o, c) == (30, 5) and outcome(0.025, (30, 5)) == "above"
    assert outcome(0.003, (3, 0)) == "tie"  # three requests are not evidence
    assert outcome(-0.03, (2, 40)) == "below"
    assert paired(orloj, Cell("w", 4.0, "fifo", 0.0, None, 0.0)) is None  # no per-request data: margin rule
    rows, summary = compare([o, c])
    assert rows[0]["outcome"] == "above" and summary["orloj_vs_baselines"]["above"] == 1


def test_cells_of_a_run_carry_per_request_results_for_the_paired_test() -> None:
    cells, _ = run_table(["two-modal"], [2.0], ["orloj", "fifo"], requests=300, seeds=2, jobs=1)
    o, f = cells
    assert len(o.met) == 2 and paired(o, f) is not None
    only_o, only_f = paired(o, f)  # type: ignore[misc]
    total_o = sum(int(np.unpackbits(np.frombuffer(b, np.uint8)).sum()) for b in o.met)
    total_f = sum(int(np.unpackbits(np.frombuffer(b, np.uint8)).sum()) for b in f.met)
    assert total_o - total_f == only_o - only_f
