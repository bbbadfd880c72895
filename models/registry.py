"""Which module builds each model, and where a model's built artifacts are found.

Resolution order: ``<data_dir>/models/<name>/`` (what ``adaserve models build`` wrote), then the
copy shipped in the package under ``adaserve/models/zoo/<name>/``. Builder modules are imported
only when a model is built, so that listing or serving models never imports torch.
"""

from __future__ import annotations

import importlib
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from rich.progress import Progress

from adaserve.broker.errors import ModelNotFound
from adaserve.models.manifest import (
    MANIFEST,
    ModelInfo,
    artifact_hashes,
    read_manifest,
    write_manifest,
)

Builder = Callable[..., ModelInfo]

BUILDERS: dict[str, tuple[str, str]] = {
    "fsdd-cnn": ("adaserve.models.fsdd_cnn", "build"),
    "av-digits": ("adaserve.models.av_digits", "build"),
    "av-video": ("adaserve.models.av_video", "build"),
    "ee-audio": ("adaserve.models.ee_audio", "build"),
    "ee-lm-xs": ("adaserve.models.lm", "build_xs"),
    "ee-lm-s": ("adaserve.models.lm", "build_s"),
    "ee-lm-code": ("adaserve.models.lm", "build_code"),
    "effnet-lite0": ("adaserve.models.effnet", "build"),
    "ee-lm-s-split": ("adaserve.models.lm.split", "build"),
}
DEFAULT_SEED = 0


def model_names() -> list[str]:
    return list(BUILDERS)


def zoo_dir() -> Path:
    """The folder of models shipped with the package."""
    return Path(__file__).resolve().parent / "zoo"


def built_dir(name: str, data_dir: Path) -> Path:
    return Path(data_dir) / "models" / name


def builder(name: str) -> Builder:
    """The ``build`` function of ``name``; ``ModelNotFound`` if unknown or not importable."""
    if name not in BUILDERS:
        raise ModelNotFound(f"unknown model {name!r} (known: {', '.join(BUILDERS)})")
    module_name, attr = BUILDERS[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ModelNotFound(f"model {name!r}: its builder module {module_name} cannot be "
                            f"imported ({exc})") from exc
    fn = getattr(module, attr, None)
    if fn is None:
        raise ModelNotFound(f"model {name!r}: {module_name} has no function {attr}()")
    return fn


def find_model(name: str, data_dir: Path) -> Path:
    """Directory holding ``name``'s manifest: the data dir's build first, then the shipped zoo."""
    for candidate in (built_dir(name, data_dir), zoo_dir() / name):
        if (candidate / MANIFEST).is_file():
            return candidate
    raise ModelNotFound(f"model {name!r} is not built (looked in {built_dir(name, data_dir)} "
                        f"and {zoo_dir() / name}); run `adaserve models build --only {name}`")


def load_info(name: str, data_dir: Path) -> tuple[Path, ModelInfo]:
    model_dir = find_model(name, data_dir)
    return model_dir, read_manifest(model_dir)


def list_models(data_dir: Path) -> list[tuple[Path, ModelInfo]]:
    """Every resolvable model (built or shipped), in registry order, then any others by name."""
    names = set(BUILDERS)
    for root in (Path(data_dir) / "models", zoo_dir()):
        if root.is_dir():
            names.update(p.parent.name for p in root.glob(f"*/{MANIFEST}"))
    ordered = [n for n in BUILDERS if n in names] + sorted(names - set(BUILDERS))
    found = []
    for n in ordered:
        try:
            found.append(load_info(n, data_dir))
        except ModelNotFound:
            continue
    return found


def build_model(name: str, out_dir: Path, *, tiny: bool = False, seed: int = DEFAULT_SEED,
                progress: Progress) -> ModelInfo:
    """Build ``name`` into ``out_dir`` (replaced only once the build succeeded); write its manifest.

    The builder works in a sibling temporary folder, so a failed build leaves the previous
    artifacts in place.
    """
    fn = builder(name)
    out_dir = Path(out_dir)
    tmp = out_dir.with_name(f".{out_dir.name}.building")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    start = time.perf_counter()
    try:
        info = fn(tmp, tiny=tiny, seed=seed, progress=progress)
        info = info.model_copy(update={
            "train": {**info.train, "build_seconds": round(time.perf_counter() - start, 2)},
        })
        info = info.model_copy(update={"hashes": artifact_hashes(tmp, info)})
        write_manifest(tmp, info)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)
    return info
