"""HELIOS's model side: drifting prompts, exit shares and Insight 1, the offline profile per depth."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from rich.progress import Progress

from adaserve.broker.errors import ModelNotFound
from adaserve.models.lm.corpus import SHARED_VOCAB
from adaserve.models.lm.helios_profile import (
    BATCH_SIZES,
    HeliosProfile,
    load_helios_profile,
    write_helios_profile,
)
from adaserve.models.lm.insight import covering_depth, exit_share, first_exit, insight1, unchanged_share
from adaserve.models.lm.prompts import drifting_prompts
from adaserve.models.manifest import read_manifest, write_manifest
from adaserve.models.registry import build_model, built_dir, zoo_dir
from adaserve.profiling.helios import measure_profile

CANDIDATES = ("ee-lm-xs", "ee-lm-s", "ee-lm-code")


def test_drifting_prompts_change_task_once_by_default() -> None:
    stream = drifting_prompts(10, seed=3)
    assert [t for t, _ in stream] == ["shakespeare"] * 5 + ["python"] * 5
    assert all(len(p) == 32 and SHARED_VOCAB.encode(p).size == 32 for _, p in stream)
    assert stream == drifting_prompts(10, seed=3) != drifting_prompts(10, seed=4)
    mixed = drifting_prompts(6, (("python", 2), ("shakespeare", 3), ("python", 1)), seed=0, length=20)
    assert [t for t, _ in mixed] == ["python"] * 2 + ["shakespeare"] * 3 + ["python"]
    with pytest.raises(ValueError, match="add up to 6"):
        drifting_prompts(6, (("python", 2),))
    with pytest.raises(ValueError, match="unknown task"):
        drifting_prompts(1, (("poetry", 1),))


def test_first_exit_and_exit_shares_on_a_constructed_table() -> None:
    conf = np.array([[0.9, 0.1, 0.5, 0.2],   # exit 2
                     [0.9, 0.9, 0.5, 0.3],   # exit 4
                     [0.9, 0.9, 0.85, 0.4]])  # exit 6
    depths = (2, 4, 6)
    assert first_exit(conf, depths, 0.8).tolist() == [2, 4, 6, 0]
    assert exit_share(conf, depths, 0.8) == {2: 0.25, 4: 0.5, 6: 0.75}


def test_covering_depth_is_the_shallowest_exit_most_confident_tokens_took() -> None:
    first = np.array([2, 2, 4, 6, 0, 0, 2, 8, 4, 2])  # 8 confident: 4 at 2, 2 at 4, 1 at 6, 1 at 8
    assert covering_depth(first, (2, 4, 6, 8), 0.5) == 2
    assert covering_depth(first, (2, 4, 6, 8), 0.7) == 4
    assert covering_depth(first, (2, 4, 6, 8), 0.9) == 8
    assert covering_depth(np.zeros(5), (2, 4), 0.7) == 4  # nobody sure anywhere: load it all


def test_unchanged_share_counts_only_breaching_tokens() -> None:
    conf_k = np.array([0.9, 0.5, 0.5, 0.5, 0.2])
    pred_k = np.array([1, 2, 3, 4, 5])
    full = np.array([9, 2, 3, 0, 5])  # the confident token differs but does not count
    same, n = unchanged_share(conf_k, pred_k, full, 0.8)
    assert (same, n) == (0.75, 4)
    assert np.isnan(unchanged_share(conf_k, pred_k, full, 0.1)[0])


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("helios")
    with Progress(disable=True) as progress:
        build_model("ee-lm-code", built_dir("ee-lm-code", data_dir), tiny=True, seed=0, progress=progress)
    return data_dir


def test_insight1_per_partial_depth(tiny_data: Path) -> None:
    got = insight1("ee-lm-code", "python", 0.2, data_dir=tiny_data, max_windows=4)
    assert sorted(got) == [2, 4, 6, 8]
    for row in got.values():
        assert 0.0 <= row["breach_share"] <= 1.0 and 0.0 <= row["exit_share"] <= 1.0
        assert row["breaches"] == pytest.approx(row["breach_share"] * 4 * 48)
    assert got[8]["unchanged"] == 1.0 or np.isnan(got[8]["unchanged"])  # the whole model agrees with itself


def test_a_measured_profile_round_trips_and_is_found_by_name(tiny_data: Path) -> None:
    model_dir = built_dir("ee-lm-code", tiny_data)
    info = read_manifest(model_dir)
    with pytest.raises(ModelNotFound, match="profile helios --only no-such-model"):
        load_helios_profile("no-such-model", tiny_data)
    profile = measure_profile(model_dir, info, repeats=1, windows=2, rss=False)
    write_helios_profile(model_dir, profile)
    write_manifest(model_dir, info)
    loaded = load_helios_profile("ee-lm-code", tiny_data)
    assert loaded == profile and loaded.family == "lm" and loaded.device == "cpu"
    assert loaded.depth_values == [2, 4, 6, 8]
    d2, d8 = loaded.at(2), loaded.at(8)
    assert set(d2.tokens_per_s) == {str(b) for b in BATCH_SIZES} and all(v > 0 for v in d2.tokens_per_s.values())
    assert set(d2.tokens_per_cpu_s) == set(d2.tokens_per_s) and all(v > 0 for v in d2.tokens_per_cpu_s.values())
    assert d2.weight_bytes < d8.weight_bytes and d8.kv_bytes_per_token == 4 * d2.kv_bytes_per_token
    assert set(d2.tasks) == {"shakespeare", "python"}
    assert d2.tasks["python"].exit_share <= d8.tasks["python"].exit_share
    with pytest.raises(KeyError):
        loaded.at(3)
    early = loaded.early_exit
    assert early is not None and early.depth == 8 and set(early.tokens_per_cpu_s) == set(d2.tokens_per_s)
    assert set(early.mean_exit) == {"shakespeare", "python"} and all(2 <= e <= 8 for e in early.mean_exit.values())


@pytest.mark.parametrize("name", CANDIDATES)
def test_every_shipped_candidate_has_a_profile_per_exit(name: str) -> None:
    path = zoo_dir() / name / "helios.json"
    if not path.is_file():
        pytest.skip(f"{name} ships no HELIOS profile in this checkout")
    profile = HeliosProfile.model_validate_json(path.read_text())
    info = read_manifest(zoo_dir() / name)
    assert profile.name == name and profile.family == info.family == "lm"
    assert profile.depth_values == [v.extra["depth"] for v in info.variants if not v.extra.get("early_exit")]
    shares = [d.tasks["shakespeare"].exit_share for d in profile.depths]
    assert shares == sorted(shares)  # a deeper cut serves at least the tokens a shallower one does
    assert [d.weight_bytes for d in profile.depths] == sorted(d.weight_bytes for d in profile.depths)


def test_profile_helios_then_show_from_the_cli(tiny_data: Path, monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    """`adaserve profile helios` writes helios.json beside the manifest; `adaserve models
    helios-show` prints it (table, JSON, plot)."""
    import json

    import typer
    from typer.testing import CliRunner

    from adaserve.models import cli as models_cli
    from adaserve.profiling import cli as profiling_cli

    monkeypatch.setenv("ADASERVE_DATA_DIR", str(tiny_data))
    app = typer.Typer()
    models_cli.register(app)
    profiling_cli.register(app)
    run = CliRunner().invoke(app, ["profile", "helios", "--only", "ee-lm-code", "--repeats", "1",
                                   "--windows", "2", "--no-rss"])
    assert run.exit_code == 0, run.output
    assert (built_dir("ee-lm-code", tiny_data) / "helios.json").is_file()
    png = tmp_path / "helios.png"
    shown = CliRunner().invoke(app, ["models", "helios-show", "ee-lm-code", "--json", "--plot", str(png)])
    assert shown.exit_code == 0, shown.output
    (profile,) = json.loads(shown.output)["profiles"]
    assert profile["name"] == "ee-lm-code" and [d["depth"] for d in profile["depths"]] == [2, 4, 6, 8]
    assert png.stat().st_size > 10_000
    table = CliRunner().invoke(app, ["models", "helios-show", "ee-lm-code"])
    assert table.exit_code == 0 and "python ppl" in table.output
    missing = CliRunner().invoke(app, ["models", "helios-show", "no-such-model"])
    assert missing.exit_code == 1 and "no HELIOS profile" in missing.output
