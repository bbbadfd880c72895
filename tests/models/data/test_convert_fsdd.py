from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.io import wavfile

from adaserve.models.data.convert_fsdd import convert, main


def write_wavs(folder: Path) -> None:
    rng = np.random.default_rng(0)
    for name in ("3_bob_7", "1_alice_0", "1_bob_2"):
        wavfile.write(folder / f"{name}.wav", 8000, (rng.normal(0, 3000, 3000)).astype(np.int16))


def test_convert_sorts_and_labels(tmp_path: Path) -> None:
    write_wavs(tmp_path)
    out = convert(tmp_path)
    assert out["features"].shape == (3, 32, 32)
    assert list(out["speaker_names"]) == ["alice", "bob"]
    assert out["labels"].tolist() == [1, 1, 3]
    assert out["takes"].tolist() == [0, 2, 7]
    assert out["speakers"].tolist() == [0, 1, 1]


def test_rerun_gives_identical_bytes(tmp_path: Path) -> None:
    write_wavs(tmp_path)
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    main([str(tmp_path), str(a)])
    main([str(tmp_path), str(b)])
    assert a.read_bytes() == b.read_bytes()


def test_wrong_rate_and_empty_folder(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        convert(tmp_path)
    wavfile.write(tmp_path / "1_x_0.wav", 16000, np.zeros(100, np.int16))
    with pytest.raises(ValueError, match="16000"):
        convert(tmp_path)
