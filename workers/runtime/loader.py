"""Finds a model's built artifacts and returns the runtime that serves a variant."""

from __future__ import annotations

from pathlib import Path

from adaserve.workers.runtime.base import Runner


def available_models(data_dir: Path) -> list[str]:
    """Names of the models whose artifacts are built (in ``data_dir``) or shipped."""
    raise NotImplementedError  # filled by the model-zoo work


def load_runner(model: str, variant: str, device: str, data_dir: Path) -> Runner:
    """Load ``model``/``variant`` on ``device`` (``cpu`` or ``gpu``); ``ModelNotFound`` if unbuilt."""
    raise NotImplementedError  # filled by the model-zoo work
