"""Finding the profile a MOSEL run should use, and keeping its strategy matrix next to it.

Order: an explicit file; ``<data_dir>/profiles/<model>.json``; ``Keys.profile(model)`` in Redis
when a URL is configured; otherwise the synthetic stand-in (and the caller is told so).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from adaserve.broker.errors import AdaserveError
from adaserve.broker.profiles import Profile
from adaserve.broker.settings import Settings

from .costs import SubsetCosts
from .matrix import StrategyMatrix, build_matrix, matrix_path
from .synthetic import is_synthetic, synthetic_av_digits_profile


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
        except Exception:  # an unreachable server only means "no measured profile from there"
            raw = None
        if raw:
            return ProfileSource(Profile.from_json(raw), f"redis:{key}", None)
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
    m.save(target)
    return m, target, True
