"""Finding the profile a MOSEL run should use, and keeping its strategy matrix next to it.

Order: an explicit file; ``<data_dir>/profiles/<model>.json``; ``Keys.profile(model)`` in Redis
when a URL is configured; the profile shipped with adaserve (``profiles/<model>.json`` here,
measured on the development machine); otherwise the synthetic stand-in (and the caller is told so).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import redis

from adaserve.broker.errors import AdaserveError
from adaserve.broker.profiles import Profile
from adaserve.broker.settings import Settings
from adaserve.planner.profiles import profile_files

from .costs import SubsetCosts
from .matrix import StrategyMatrix, build_matrix, matrix_path
from .synthetic import is_synthetic, synthetic_av_digits_profile

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProfileSource:
    profile: Profile
    source: str  # "file:<path>", "redis:<key>" or "synthetic"
    path: Path | None

    @property
    def synthetic(self) -> bool:
        return is_synthetic(self.profile)


def find_profile(settings: Settings, model: str = "av-digits", path: Path | None = None) -> ProfileSource:
    """The measured profile when there is one, else the synthetic stand-in."""
    candidate = path or settings.data_dir / "profiles" / f"{model}.json"
    if candidate.is_file():
        return ProfileSource(Profile.from_json(candidate.read_bytes()), f"file:{candidate}", candidate)
    if path is not None:
        raise AdaserveError(f"no profile at {path}")
    if settings.redis_url:
        from adaserve.broker.connection import connect
        from adaserve.broker.keys import Keys

        key = Keys(settings.namespace).profile(model)
        try:
            raw = connect(settings).get(key)
        except (redis.RedisError, ValueError) as exc:  # unreachable, refused (auth), or an unparsable URL
            # Serving on the shipped profile is the right fallback, but the operator must hear why.
            # (the URL stays out of the line: it may hold a password; redis' own text names the host)
            log.warning("%s: no profile from the server (%s: %s); using the shipped profile or the "
                        "synthetic one instead", model, type(exc).__name__, exc)
            raw = None
        if raw:
            return ProfileSource(Profile.from_json(raw), f"redis:{key}", None)
    shipped = SHIPPED_DIR / f"{model}.json"
    if shipped.is_file():
        return ProfileSource(Profile.from_json(shipped.read_bytes()), f"file:{shipped}", shipped)
    return ProfileSource(synthetic_av_digits_profile(), "synthetic", None)


def load_or_build_matrix(src: ProfileSource, cache_dir: Path, *, max_size: int, step: float,
                         device: str = "cpu", progress: Callable[[int], None] | None = None
                         ) -> tuple[StrategyMatrix, Path, bool]:
    """The matrix for ``src``: reused from disk when it matches the profile and the grid, else
    solved and saved (next to a profile file, or in ``cache_dir``). Returns (matrix, path, built)."""
    name = f"{src.profile.model}{'.synthetic' if src.synthetic else ''}.json"
    target = matrix_path(src.path) if src.path else matrix_path(cache_dir / name)
    if target.is_file():
        try:
            m = StrategyMatrix.load(target)
            if (m.profile_created_ms == src.profile.created_ms and m.max_size == max_size
                    and m.floor_step == step and m.device == device and m.synthetic == src.synthetic):
                return m, target, False
        except ValueError:
            pass  # stale or foreign file: rebuild it
    costs = SubsetCosts.from_profile(src.profile, device)
    m = build_matrix(costs, max_size, step=step, device=device, profile=src.profile, progress=progress)
    try:
        m.save(target)
    except OSError:  # beside a read-only profile (an installed package): keep it in the cache
        target = matrix_path(cache_dir / name)
        m.save(target)
    return m, target, True


# -- serving: the live planner's profile and matrix ----------------------------------------------

SHIPPED_DIR = Path(__file__).with_name("profiles")


def modality_subsets(profile: Profile, device: str = "cpu") -> tuple[str, ...]:
    """The profile's variants that are modality subsets, or ``()`` when it has none.

    A profile does not say what kind its variants are, so the names decide: variants with an
    accuracy and latencies on ``device`` count as subsets when there are at least two, each is a
    ``+``-joined set of modality names, and one of them uses every modality the others use
    (av-digits: ``audio``, ``image``, ``audio+image``). Early exits (``exit1``...) and depths fail
    the last test, so they are never mistaken for modalities.
    """
    acc = {q.variant for q in profile.quality if q.metric == "accuracy"}
    names = sorted({p.variant for p in profile.latency if p.device == device} & acc)
    if len(names) < 2:
        return ()
    tokens = {n: frozenset(n.split("+")) for n in names}
    union = frozenset().union(*tokens.values())
    if len(union) < 2 or union not in tokens.values() or any("" in t for t in tokens.values()):
        return ()
    return tuple(names)


def serving_profile(settings: Settings, model: str, stored: Profile | None,
                    device: str = "cpu") -> ProfileSource | None:
    """The profile the live planner selects modalities with: the one in Redis (``stored``), else
    ``<data_dir>/profiles/<model>.json``, else the one shipped with adaserve; ``None`` when none
    of them has modality subsets. A synthetic profile is never served from."""
    if stored is not None and modality_subsets(stored, device) and not is_synthetic(stored):
        return ProfileSource(stored, f"redis:{model}", None)
    for p, path in profile_files(model, (settings.data_dir / "profiles", SHIPPED_DIR)):
        if modality_subsets(p, device) and not is_synthetic(p):
            return ProfileSource(p, f"file:{path}", path)
    return None


def cached_matrix(src: ProfileSource, cache_dir: Path, *, max_size: int, step: float,
                  device: str = "cpu") -> StrategyMatrix | None:
    """A matrix already solved for this profile and grid: next to the profile file (the shipped
    one comes with its matrix) or in ``cache_dir``; ``None`` when it must be built."""
    places = [matrix_path(src.path)] if src.path else []
    places.append(_cache_file(src, cache_dir))
    for path in places:
        if not path.is_file():
            continue
        try:
            m = StrategyMatrix.load(path)
        except ValueError:
            continue
        if (m.profile_created_ms == src.profile.created_ms and m.max_size == max_size
                and m.floor_step == step and m.device == device and not m.synthetic):
            return m
    return None


def build_cached_matrix(src: ProfileSource, cache_dir: Path, *, max_size: int, step: float,
                        device: str = "cpu") -> StrategyMatrix:
    """Solve the matrix (seconds: one integer program per size and distinct floor) and keep it in
    ``cache_dir`` for the next start; a cache that cannot be written only costs the next start."""
    m = build_matrix(SubsetCosts.from_profile(src.profile, device), max_size, step=step,
                     device=device, profile=src.profile)
    try:
        m.save(_cache_file(src, cache_dir))
    except OSError:
        pass
    return m


def _cache_file(src: ProfileSource, cache_dir: Path) -> Path:
    return cache_dir / f"{src.profile.model}-{int(src.profile.created_ms)}.mosel.json"
