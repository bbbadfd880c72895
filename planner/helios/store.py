"""Where the repository's figures come from: each candidate's offline profile (``helios.json``
beside its manifest, ``models/lm/helios_profile.py``), or, for a model built before profiles
existed, figures derived from its manifest and config (named as such: ``source``)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adaserve.broker.codec import unpack
from adaserve.broker.errors import ConfigError
from adaserve.broker.keys import Keys

from .repository import Candidate, DepthFigures, Repository, candidate_from_profile

if TYPE_CHECKING:
    import redis

log = logging.getLogger("adaserve.planner.helios")
PROFILE = "helios.json"
# Manifest-derived stand-in: a CPU thread's rate in multiply-adds/s for a per-token cost of about
# 12 n_embd^2 per layer, and a disk read rate for loads; both overwritten by what the PHT measures.
_MACS_PER_S = 2.0e9
_READ_BYTES_PER_S = 200e6


# The zoo shipped in the package; built models live under ``<data_dir>/models`` and come first.
# Manifests are read as JSON here: the planner's layer does not import the model zoo.
ZOO = Path(__file__).resolve().parents[2] / "models" / "zoo"


def manifests(data_dir: Path) -> dict[str, tuple[Path, dict[str, Any]]]:
    """Every model's manifest (as a map) by name; a built one over a shipped one."""
    out: dict[str, tuple[Path, dict[str, Any]]] = {}
    for root in (ZOO, Path(data_dir) / "models"):
        for path in sorted(root.glob("*/manifest.json")) if root.is_dir() else ():
            try:
                raw = json.loads(path.read_text())
            except (OSError, ValueError) as exc:
                log.warning("%s: unreadable manifest (%s)", path, exc)
                continue
            if isinstance(raw, dict) and isinstance(raw.get("name"), str):
                out[raw["name"]] = (path.parent, raw)
    return out


def load_repository(data_dir: Path) -> Repository:
    """Every model with ``lm-exit`` variants, grouped by its manifest's ``family``."""
    cands = []
    for name, (model_dir, info) in sorted(manifests(data_dir).items()):
        if not any(v.get("kind") == "lm-exit" for v in info.get("variants", [])):
            continue
        try:
            cands.append(load_candidate(model_dir, info))
        except (ConfigError, OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("%s: left out of the HELIOS repository (%s)", name, exc)
    return Repository.of(cands)


def load_candidate(model_dir: Path, info: dict[str, Any]) -> Candidate:
    path = model_dir / PROFILE
    if path.is_file():
        raw = json.loads(path.read_text())
        if not isinstance(raw, dict):
            raise ConfigError(f"{path} is not a JSON object")
        return candidate_from_profile(raw)
    return from_manifest(model_dir, info)


def from_manifest(model_dir: Path, info: dict[str, Any]) -> Candidate:
    """Figures from the manifest (held-out perplexity per depth) and the network's shape (weights,
    KV cache, an estimated rate); no per-task split, so every task gets the same figures."""
    cfg: dict[str, Any] = json.loads((model_dir / "config.json").read_text())
    n_embd = int(cfg["n_embd"])
    figs: dict[int, DepthFigures] = {}
    for v in info.get("variants", []):
        extra = v.get("extra") or {}
        if v.get("kind") != "lm-exit" or "depth" not in extra or extra.get("early_exit"):
            continue
        d = int(extra["depth"])
        weight = sum((model_dir / a).stat().st_size for a in v.get("artifacts", []) if (model_dir / a).is_file())
        rate = _MACS_PER_S / (12 * n_embd * n_embd * d)
        q = v.get("quality")
        ppl = float(q) if q is not None else float("inf")
        figs[d] = DepthFigures(d, {1: rate, 4: 3 * rate, 16: 8 * rate}, 1.0 / rate, weight,
                               2 * d * n_embd * 4, weight / _READ_BYTES_PER_S, 1.0 / rate,
                               {"shakespeare": ppl, "python": ppl}, {})
    if not figs:
        raise ConfigError(f"{info.get('name')} has no lm-exit variant with a depth")
    return Candidate(str(info["name"]), str(info.get("family", info["name"])), 0.8, figs)


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
