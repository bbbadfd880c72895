"""What the benchmarks' panel plots share: a grid of panels, one per item, saved as a PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def panels(n: int, *, cols: int = 4, size: tuple[float, float] = (4.0, 3.2), **kw: Any) -> tuple[Any, Any]:
    """A figure with ``n`` panels in rows of at most ``cols`` (headless: no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = max(1, min(cols, n))
    rows = (n + cols - 1) // cols
    return plt.subplots(rows, cols, figsize=(size[0] * cols, size[1] * rows), squeeze=False, **kw)


def save(fig: Any, axes: Any, used: int, path: Path) -> Path:
    """Hide the panels past ``used``, lay out, write ``path`` (folders made) and free the figure."""
    import matplotlib.pyplot as plt

    for ax in list(axes.flat)[used:]:
        ax.axis("off")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
