"""The planner reads the shipped HELIOS profiles as plain JSON (it may not import the zoo): every
``helios.json`` in the zoo must come through its reader with the figures the model side's own
loader (``models/lm/helios_profile.py``) sees, so the two cannot drift apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaserve.models.lm.helios_profile import PROFILE, read_helios_profile
from adaserve.planner.helios.store import ZOO, load_candidate, load_repository, manifests

SHIPPED = sorted(ZOO.glob(f"*/{PROFILE}"))


def test_the_zoo_ships_a_profile_for_every_lm_candidate() -> None:
    assert {p.parent.name for p in SHIPPED} >= {"ee-lm-xs", "ee-lm-s", "ee-lm-code"}


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.parent.name)
def test_every_shipped_profile_reads_the_same_through_the_planner(path: Path, tmp_path: Path) -> None:
    prof = read_helios_profile(path)
    model_dir, info = manifests(tmp_path)[prof.name]
    assert model_dir == path.parent
    cand = load_candidate(model_dir, info)
    assert (cand.name, cand.family, cand.tau, cand.device) == (prof.name, prof.family, prof.tau, prof.device)
    assert cand.depths == tuple(sorted(prof.depth_values))
    for d in prof.depths:
        fig = cand.at(d.depth)
        assert fig.tokens_per_s == {int(b): v for b, v in d.tokens_per_s.items()}
        assert (fig.ttft_s, fig.weight_bytes, fig.kv_bytes_per_token, fig.load_s, fig.cpu_s_per_token) == (
            d.ttft_s, d.weight_bytes, d.kv_bytes_per_token, d.load_s, d.cpu_s_per_token)
        assert fig.perplexity == {t: f.perplexity for t, f in d.tasks.items()}
        assert fig.exit_share == {t: f.exit_share for t, f in d.tasks.items()}
    # the early-exit baseline is not a depth HELIOS can load to
    assert prof.early_exit is None or len(cand.depths) == len(prof.depths)


def test_the_lm_family_is_the_three_profiled_candidates(tmp_path: Path) -> None:
    repo = load_repository(tmp_path)
    assert [c.name for c in repo.candidates("lm")] == ["ee-lm-code", "ee-lm-s", "ee-lm-xs"]
    assert repo.candidate("ee-lm-code") is not None and repo.candidate("ee-lm-code").depths == (2, 4, 6, 8)
