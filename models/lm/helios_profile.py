"""The offline HELIOS profile of an ``lm`` candidate: what each depth costs and how good it is.

Written as ``helios.json`` next to the model's manifest by ``adaserve profile helios``
(``profiling.helios``), read by planners through ``load_helios_profile(name)``. Per depth K (one of
the model's exits): tokens/s at batch sizes 1, 4 and 16, time to first token, weight and KV-cache
bytes (computed, and the resident-memory growth measured in a fresh process), the measured time to
load that depth from disk, CPU seconds per token, and per task its held-out perplexity at K, the
share of tokens whose first exit with confidence >= tau is <= K, and Insight 1 (of the tokens that
breach tau at K, the share the whole model would have emitted too).
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from adaserve.broker.errors import ModelNotFound

PROFILE = "helios.json"
BATCH_SIZES = (1, 4, 16)


class TaskFigures(BaseModel):
    model_config = ConfigDict(extra="forbid")

    perplexity: float  # at this depth, on the task's held-out tail
    exit_share: float  # tokens whose first exit with confidence >= tau is <= this depth
    breach_share: float  # tokens below tau at this depth (emitted anyway when loaded up to it)
    unchanged: float | None = None  # Insight 1: of those, the share the whole model agrees with


class DepthProfile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    depth: int
    tokens_per_s: dict[str, float]  # batch size (as a string) -> generated tokens per second
    # The same per CPU second of the process: what the work costs, unaffected by how much of a
    # core the profiler got (timings on a shared host swing with its load; these barely do).
    tokens_per_cpu_s: dict[str, float] = {}
    ttft_s: float  # batch 1: prefill and first token
    weight_bytes: int
    kv_bytes_per_token: int  # per sequence
    load_s: float  # reading this depth's files and building the runner
    cpu_s_per_token: float  # process CPU seconds per generated token, batch 1
    rss_weights_bytes: int | None = None  # measured: resident growth on loading this depth
    rss_batch16_bytes: int | None = None  # measured: further growth running a batch of 16
    tasks: dict[str, TaskFigures]


class EarlyExitProfile(BaseModel):
    """The ``early-exit`` variant (all layers, each token leaving at its first exit >= tau): the
    static baseline HELIOS is compared with. Same speed figures as a depth, and the mean exit its
    tokens took per task."""

    model_config = ConfigDict(extra="forbid")

    depth: int  # layers loaded (all)
    tokens_per_s: dict[str, float]
    tokens_per_cpu_s: dict[str, float]
    ttft_s: float
    cpu_s_per_token: float
    mean_exit: dict[str, float]


class HeliosProfile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    family: str
    tau: float = 0.8
    host: str
    device: str
    prompt_tokens: int  # what the timings used: prompt length and tokens generated per request
    new_tokens: int
    repeats: int
    depths: list[DepthProfile]
    early_exit: EarlyExitProfile | None = None

    @property
    def depth_values(self) -> list[int]:
        return [d.depth for d in self.depths]

    def at(self, depth: int) -> DepthProfile:
        for d in self.depths:
            if d.depth == depth:
                return d
        raise KeyError(f"{self.name} has no depth {depth} (has {self.depth_values})")


def profile_path(model_dir: Path) -> Path:
    return Path(model_dir) / PROFILE


def write_helios_profile(model_dir: Path, profile: HeliosProfile) -> Path:
    path = profile_path(model_dir)
    path.write_text(json.dumps(profile.model_dump(mode="json"), indent=1) + "\n")
    return path


def read_helios_profile(path: Path) -> HeliosProfile:
    if not path.is_file():
        raise ModelNotFound(f"no HELIOS profile at {path}; run `adaserve profile helios`")
    try:
        return HeliosProfile.model_validate_json(path.read_text())
    except ValidationError as exc:
        raise ModelNotFound(f"{path} is not a valid HELIOS profile: {exc}") from exc


def load_helios_profile(name: str, data_dir: Path | None = None) -> HeliosProfile:
    """``name``'s profile: from its build in the data dir, else the copy shipped with the zoo."""
    from adaserve.broker.settings import load_settings
    from adaserve.models.registry import built_dir, zoo_dir

    data_dir = data_dir if data_dir is not None else load_settings().data_dir
    for d in (built_dir(name, data_dir), zoo_dir() / name):
        if profile_path(d).is_file():
            return read_helios_profile(profile_path(d))
    raise ModelNotFound(f"model {name!r} has no HELIOS profile (looked in {built_dir(name, data_dir)} "
                        f"and {zoo_dir() / name}); run `adaserve profile helios --only {name}`")
