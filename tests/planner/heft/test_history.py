"""Performance histories: seeds, trust after ten measurements, interpolation, hand-over cost."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaserve.broker.errors import ConfigError
from adaserve.planner.heft import WHOLE, Histories, Key, Transfer
from adaserve.planner.heft.seed import seed_file

K = Key("m", WHOLE, "gpu")
DOCS = Path(__file__).resolve().parents[3] / "docs"


def test_a_seed_holds_until_measured_and_trust_comes_after_ten() -> None:
    h = Histories()
    h.seed(K, 8, 0.010)
    est = h.predict(K, 8)
    assert est is not None and est.seconds == 0.010 and not est.trusted and est.measured == 0
    for _ in range(9):
        h.observe(K, 8, 0.020)
        assert not h.predict(K, 8).trusted  # type: ignore[union-attr]
    h.observe(K, 8, 0.020)
    est = h.predict(K, 8)
    assert est is not None and est.trusted and est.measured == 10 and abs(est.seconds - 0.020) < 1e-12


def test_sizes_between_are_interpolated_and_beyond_extrapolated() -> None:
    h = Histories()
    h.seed(K, 1, 0.001)
    h.seed(K, 9, 0.009)
    h.seed(K, 17, 0.013)
    assert abs(h.predict(K, 5).seconds - 0.005) < 1e-12  # type: ignore[union-attr]
    assert abs(h.predict(K, 13).seconds - 0.011) < 1e-12  # type: ignore[union-attr]
    assert abs(h.predict(K, 25).seconds - 0.017) < 1e-12  # type: ignore[union-attr]
    assert h.predict(Key("m", "part1", "gpu"), 4) is None


def test_transfer_fit() -> None:
    t = Transfer()
    for n in (1, 4, 16, 32, 1, 32):
        t.observe(n, 0.0005 + 0.0001 * n)
    assert abs(t.fixed_s - 0.0005) < 1e-9 and abs(t.per_byte_s - 0.0001) < 1e-9
    assert abs(t.predict(8) - 0.0013) < 1e-9


def test_seed_from_the_measured_h100_profile() -> None:
    h = Histories()
    n = seed_file(h, DOCS / "gpu-h100.json", models=["effnet-lite0"])
    assert n == 18  # whole, part1, part2 x batch 1, 8, 32 x cpu, gpu
    gpu = h.predict(Key("effnet-lite0", WHOLE, "gpu"), 32)
    cpu = h.predict(Key("effnet-lite0", WHOLE, "cpu"), 32)
    assert gpu is not None and cpu is not None and cpu.seconds > 2 * gpu.seconds


def test_a_bad_profile_is_a_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "p.json"
    bad.write_text("{}")
    with pytest.raises(ConfigError, match="rows"):
        seed_file(Histories(), bad)


def test_a_cold_first_run_is_left_out_once() -> None:
    h = Histories()
    h.seed(K, 1, 0.010)
    h.observe(K, 1, 0.080)  # the session's first call
    assert h.predict(K, 1).seconds == 0.010  # type: ignore[union-attr]
    h.observe(K, 1, 0.012)
    h.observe(K, 1, 0.080)  # no longer the first: a measurement like any other
    assert abs(h.predict(K, 1).seconds - 0.046) < 1e-12  # type: ignore[union-attr]


def test_seeds_are_read_in_the_scale_their_kind_measures() -> None:
    h = Histories()
    p1, p2 = Key("m", "part1", "gpu"), Key("m", "part2", "cpu")
    h.seed(K, 1, 0.010)
    h.seed(K, 8, 0.040)
    h.seed(p1, 1, 0.008)
    h.seed(p2, 1, 0.025)
    assert h.scale("gpu") == 1.0 and h.predict(p1, 1).seconds == 0.008  # type: ignore[union-attr]
    h.observe(K, 1, 0.020)  # this host runs the gpu kind at twice its profile
    assert abs(h.scale("gpu") - 2.0) < 1e-12
    assert abs(h.predict(p1, 1).seconds - 0.016) < 1e-12  # type: ignore[union-attr]
    assert abs(h.predict(K, 8).seconds - 0.080) < 1e-12  # type: ignore[union-attr]  # an unmeasured size too
    assert abs(h.predict(K, 4).seconds - (0.020 + (0.080 - 0.020) * 3 / 7)) < 1e-12  # type: ignore[union-attr]
    assert h.predict(p2, 1).seconds == 0.025 and h.scale("cpu") == 1.0  # type: ignore[union-attr]  # another kind
    assert abs(h.predict(K, 1).seconds - 0.020) < 1e-12  # type: ignore[union-attr]  # measured: as measured
    row = next(r for r in h.snapshot() if r["part"] == "part1")
    assert abs(float(row["mean_ms"]) - 16.0) < 1e-9  # type: ignore[arg-type]
    h.observe(p1, 1, 0.012)  # the median of the kind's ratios: 2.0 and 1.5
    assert abs(h.scale("gpu") - 1.75) < 1e-12
    h.observe(Key("m", WHOLE, "cpu"), 1, 0.5)  # no seed behind it: no ratio
    assert h.scale("cpu") == 1.0


def test_a_cold_run_left_out_does_not_move_the_scale() -> None:
    h = Histories()
    h.seed(K, 1, 0.010)
    h.observe(K, 1, 0.080)
    assert h.scale("gpu") == 1.0
