from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import pytest

from adaserve.broker.errors import ConfigError
from adaserve.planner.helios.repository import candidate_from_profile
from adaserve.planner.helios.store import load_repository

PROFILE = {  # the shape the HELIOS profiles have (models/lm/helios_profile.py)
    "name": "ee-lm-code", "family": "lm", "tau": 0.8, "host": "x", "device": "cpu",
    "depths": [{"depth": d, "tokens_per_s": {"1": 100.0 / d, "4": 300.0 / d, "16": 800.0 / d}, "ttft_s": 0.01 * d,
                "weight_bytes": 10**6 * d, "kv_bytes_per_token": 1024 * d, "load_s": 0.01 * d,
                "cpu_s_per_token": 0.01 * d,
                "tasks": {"shakespeare": {"perplexity": 9.0 - d, "exit_share": 0.2 * d},
                          "python": {"perplexity": 5.0 - 0.5 * d, "exit_share": 0.25 * d}}}
               for d in (2, 4, 6, 8)],
}


def test_a_profile_becomes_a_candidate() -> None:
    c = candidate_from_profile(PROFILE)
    assert c.depths == (2, 4, 6, 8) and c.family == "lm"
    f = c.at(4)
    assert f.rate(1) == 25.0 and f.rate(4) == 75.0 and f.rate(16) == 200.0
    assert f.perplexity == {"shakespeare": 5.0, "python": 3.0} and f.exit_share["python"] == 1.0
    with pytest.raises(KeyError):
        c.at(3)


def test_a_malformed_profile_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        candidate_from_profile({"name": "x", "family": "lm", "depths": []})


def test_the_zoo_language_models_form_a_family(tmp_path: Path) -> None:
    repo = load_repository(tmp_path)
    fams = {f: [c.name for c in cs] for f, cs in repo.families.items()}
    lm = [f for f, names in fams.items() if "ee-lm-s" in names]
    assert lm and "ee-lm-xs" in fams[lm[0]]
    assert not repo.is_family("fsdd-cnn")  # no lm-exit variants
    s = repo.candidate("ee-lm-s")
    assert s is not None and s.depths == (1, 2, 3, 4)
    assert s.at(1).weight_bytes < s.at(4).weight_bytes


def test_a_rate_between_profiled_batch_sizes_interpolates_the_batchs_time() -> None:
    f = candidate_from_profile(PROFILE).at(4)  # 25 / 75 / 200 tokens/s at batch 1 / 4 / 16
    # a batch's time per token of one sequence: 4/75 s at 4, 16/200 at 16; at 10 half-way
    assert f.rate(10) == pytest.approx(10 / ((4 / 75 + 16 / 200) / 2))
    # a batch of 15 runs nearly as fast per token as one of 16, not at batch 4's rate
    assert f.rate(15) > 0.95 * f.rate(16) > 2 * f.rate(4)
    # beyond the largest size, the last segment's slope; below the smallest, its rate
    assert f.rate(28) == pytest.approx(28 / (16 / 200 + (16 / 200 - 4 / 75) / 12 * 12))
    assert f.rate(0) == f.rate(1) == 25.0
    rates = [f.rate(b) for b in range(1, 40)]
    assert all(a < b for a, b in itertools.pairwise(rates))


def test_a_profile_whose_largest_batch_timed_faster_extends_flat() -> None:
    f = candidate_from_profile(PROFILE).at(4)
    # noise: batch 16 measured at less time per step than batch 4 (16/700 < 4/75)
    noisy = dataclasses.replace(f, tokens_per_s={1: 25.0, 4: 75.0, 16: 700.0})
    assert noisy.rate(64) == pytest.approx(64 / (16 / 700))  # the largest batch's time, not a falling line
    assert all(noisy.rate(b) > 0 for b in range(1, 4096, 97))
