from __future__ import annotations

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
    assert f.rate(1) == 25.0 and f.rate(8) == 75.0 and f.rate(32) == 200.0
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
