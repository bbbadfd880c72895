"""Copy scikit-learn's bundled handwritten digits into ``digits.npz`` (run once; committed).

    python -m adaserve.models.data.convert_digits models/data/digits.npz

Kept in the project so that the image half of ``av-digits`` does not depend on the installed
scikit-learn version: ``images`` (uint8, N x 8 x 8, values 0-16) and ``labels``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from adaserve.models.data.convert_fsdd import write_npz


def convert() -> dict[str, np.ndarray]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    return {"images": digits.images.astype(np.uint8), "labels": digits.target.astype(np.int64)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="npz file to write")
    args = parser.parse_args(argv)
    write_npz(convert(), args.out)
    print(f"digits -> {args.out} ({args.out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
