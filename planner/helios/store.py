"""Where the repository's figures come from: each candidate's offline profile (``helios.json``
beside its manifest, ``models/lm/helios_profile.py``), or, for a model built before profiles
existed, figures derived from its manifest and config (named as such: ``source``)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adaserve.broker.codec import unpack
from adaserve.broker.errors import ConfigError, ModelNotFound
from adaserve.broker.keys import Keys
from adaserve.models.manifest import ModelInfo
from adaserve.models.registry import list_models

from .repository import Candidate, DepthFigures, Repository, candidate_from_profile

if TYPE_CHECKING:
    import redis

log = logging.getLogger("adaserve.planner.helios")
PROFILE = "helios.json"
# Manifest-derived stand-in: a CPU thread's rate in multiply-adds/s for a per-token cost of about
# 12 n_embd^2 per layer, and a disk read rate for loads; both overwritten by what the PHT measures.
_MACS_PER_S = 2.0e9
_READ_BYTES_PER_S = 200e6


def load_repository(data_dir: Path) -> Repository:
    """Every model with ``lm-exit`` variants, grouped by its manifest's ``family``."""
    cands = []
    for model_dir, info in list_models(Path(data_dir)):
        if not any(v.kind == "lm-exit" for v in info.variants):
            continue
        try:
            cands.append(load_candidate(model_dir, info))
        except (ConfigError, ModelNotFound, OSError, ValueError) as exc:
            log.warning("%s: left out of the HELIOS repository (%s)", info.name, exc)
    return Repository.of(cands)


def load_candidate(model_dir: Path, info: ModelInfo) -> Candidate:
    path = model_dir / PROFILE
    if path.is_file():
        raw = json.loads(path.read_text())
        if not isinstance(raw, dict):
            raise ConfigError(f"{path} is not a JSON object")
        return candidate_from_profile(raw)
    return from_manifest(model_dir, info)


def from_manifest(model_dir: Path, info: ModelInfo) -> Candidate:
    """Figures from the manifest (held-out perplexity per depth) and the network's shape (weights,
    KV cache, an estimated rate); no per-task split, so every task gets the same figures."""
    cfg: dict[str, Any] = json.loads((model_dir / "config.json").read_text())
    n_embd = int(cfg["n_embd"])
    figs: dict[int, DepthFigures] = {}
    for v in info.variants:
        if v.kind != "lm-exit" or "depth" not in v.extra or v.extra.get("early_exit"):
            continue
        d = int(v.extra["depth"])
        weight = sum((model_dir / a).stat().st_size for a in v.artifacts if (model_dir / a).is_file())
        rate = _MACS_PER_S / (12 * n_embd * n_embd * d)
        ppl = float(v.quality) if v.quality is not None else float("inf")
        figs[d] = DepthFigures(d, {1: rate, 4: 3 * rate, 16: 8 * rate}, 1.0 / rate, weight,
                               2 * d * n_embd * 4, weight / _READ_BYTES_PER_S, 1.0 / rate,
                               {"shakespeare": ppl, "python": ppl}, {})
    if not figs:
        raise ConfigError(f"{info.name} has no lm-exit variant with a depth")
    return Candidate(info.name, info.family, 0.8, figs)


def read_tables(r: redis.Redis[bytes], keys: Keys, family: str | None = None) -> list[dict[str, Any]]:
    """HELIOS's state per family as the live planner last stored it (all families when ``family``
    is None), newest first."""
    if family is not None:
        names = [keys.helios_table(family)]
    else:
        names = sorted({k.decode() if isinstance(k, bytes) else str(k)
                        for k in r.scan_iter(match=keys.helios_table("*"), count=100)})
    out = []
    for name in names:
        raw = r.get(name)
        if raw:
            out.append(unpack(raw))
    return sorted(out, key=lambda t: -float(t.get("ts", 0.0)))
