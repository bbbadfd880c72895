"""Profiles shipped with adaserve for the zoo's models, measured on the development machine
(2 shared CPU cores, onnxruntime on the CPU) with ``adaserve profile MODEL --local``.

They are the policies' prior when neither Redis nor ``<data_dir>/profiles`` has one: without any,
every policy starts from a cautious 10 ms a request, 50 times ee-audio's real cost, and ORLOJ's
execution-time distributions only learn from requests measured alone (batches of one, or the
online profiler). Re-profile on the serving machine (``adaserve profile MODEL``) to replace them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from adaserve.broker.profiles import Profile

__all__ = ["SHIPPED", "fallback_profile", "profile_files"]

SHIPPED = Path(__file__).parent


def profile_files(model: str, places: Iterable[Path]) -> Iterator[tuple[Profile, Path]]:
    """The profiles of ``model`` stored as ``<place>/<model>.json``, in the order of ``places``;
    missing, unreadable or other models' files are skipped (the next place may do)."""
    for place in places:
        path = place / f"{model}.json"
        if not path.is_file():
            continue
        try:
            profile = Profile.from_json(path.read_bytes())
        except ValueError:
            continue
        if profile.model == model:
            yield profile, path


def fallback_profile(data_dir: Path, model: str) -> tuple[Profile, str] | None:
    """The profile of ``model`` under ``data_dir/profiles``, else the shipped one, with where it
    came from; ``None`` when there is neither (or neither parses)."""
    for profile, path in profile_files(model, (data_dir / "profiles", SHIPPED)):
        return profile, str(path)
    return None
