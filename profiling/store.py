"""Where profiles live: one JSON value per model in Redis, and ``<data_dir>/profiles/<model>.json``.

Each profiling job measures one (variant, device) and merges its points into the model's profile:
points of the same variant and device are replaced, all others kept. The Redis merge is an
optimistic transaction (WATCH/MULTI), so jobs of one model finishing at once on several workers
do not lose each other's points.
"""

from __future__ import annotations

from pathlib import Path

import redis

from adaserve.broker.keys import Keys
from adaserve.broker.profiles import Profile


def merge(base: Profile | None, new: Profile) -> Profile:
    """``base`` with every (variant, device) that ``new`` measured replaced by ``new``'s points."""
    if base is None:
        return new
    if base.model != new.model:
        raise ValueError(f"cannot merge a profile of {new.model!r} into one of {base.model!r}")
    measured = {(p.variant, p.device) for p in new.latency} | {(p.variant, p.device) for p in new.exec_hist} \
        | {(p.variant, p.device) for p in new.parts}
    scored = {q.variant for q in new.quality}
    return Profile(
        model=base.model, created_ms=max(base.created_ms, new.created_ms), host={**base.host, **new.host},
        latency=[p for p in base.latency if (p.variant, p.device) not in measured] + new.latency,
        quality=[q for q in base.quality if q.variant not in scored] + new.quality,
        exec_hist=[h for h in base.exec_hist if (h.variant, h.device) not in measured] + new.exec_hist,
        parts=[p for p in base.parts if (p.variant, p.device) not in measured] + new.parts,
    )


def load(r: redis.Redis[bytes], keys: Keys, model: str) -> Profile | None:
    raw = r.get(keys.profile(model))
    return Profile.from_json(raw) if raw else None


def merge_into_redis(r: redis.Redis[bytes], keys: Keys, new: Profile, attempts: int = 50) -> Profile:
    """Merge ``new`` into the stored profile atomically; returns the stored result."""
    key = keys.profile(new.model)
    for _ in range(attempts):
        with r.pipeline() as pipe:
            try:
                pipe.watch(key)
                raw = pipe.get(key)
                merged = merge(Profile.from_json(raw) if raw else None, new)
                pipe.multi()
                pipe.set(key, merged.to_json())
                pipe.execute()
                return merged
            except redis.WatchError:
                continue
    raise RuntimeError(f"could not merge the profile of {new.model!r}: {attempts} concurrent updates")


def profile_path(data_dir: Path, model: str) -> Path:
    return Path(data_dir) / "profiles" / f"{model}.json"


def save_file(data_dir: Path, profile: Profile) -> Path:
    path = profile_path(data_dir, profile.model)
    profile.save(path)
    return path


def load_file(data_dir: Path, model: str) -> Profile | None:
    path = profile_path(data_dir, model)
    return Profile.from_json(path.read_text()) if path.is_file() else None


def stored_models(r: redis.Redis[bytes], keys: Keys, data_dir: Path) -> list[str]:
    """Models with a profile in Redis or in the data directory."""
    prefix = keys.profile("")
    names = {k.decode()[len(prefix):] for k in r.scan_iter(match=prefix + "*", count=500)}
    folder = Path(data_dir) / "profiles"
    if folder.is_dir():
        names |= {p.stem for p in folder.glob("*.json")}
    return sorted(names)
