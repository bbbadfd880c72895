"""Convert the FSDD WAV recordings into ``fsdd_logmel.npz`` (run once; the result is committed).

    python -m adaserve.models.data.convert_fsdd ../shared/data/fsdd/recordings \
        models/data/fsdd_logmel.npz

File names are ``{digit}_{speaker}_{take}.wav``; the npz holds ``features`` (uint8, N x n_mels x
frames), ``labels``, ``speakers`` (index into ``speaker_names``), ``takes`` and the log-mel
settings, sorted by name so that the output is the same on every run.
"""

from __future__ import annotations

import argparse
import io
from dataclasses import asdict
from pathlib import Path

import numpy as np
from scipy.io import wavfile

from adaserve.broker.errors import DataError
from adaserve.models.data.logmel import LogMelConfig, log_mel


def convert(recordings: Path, cfg: LogMelConfig = LogMelConfig()) -> dict[str, np.ndarray]:
    """Features and metadata of every ``*.wav`` under ``recordings``."""
    files = sorted(recordings.glob("*.wav"))
    if not files:
        raise FileNotFoundError(f"no .wav files in {recordings}")
    rows: list[tuple[int, str, int, np.ndarray]] = []
    for f in files:
        digit, speaker, take = f.stem.split("_")
        rate, samples = wavfile.read(f)
        if rate != cfg.sample_rate:
            raise DataError(f"{f.name}: {rate} Hz, expected {cfg.sample_rate}")
        rows.append((int(digit), speaker, int(take), log_mel(samples, cfg)))
    rows.sort(key=lambda r: (r[1], r[0], r[2]))
    speakers = sorted({r[1] for r in rows})
    return {
        "features": np.stack([r[3] for r in rows]),
        "labels": np.array([r[0] for r in rows], dtype=np.int64),
        "speakers": np.array([speakers.index(r[1]) for r in rows], dtype=np.int64),
        "takes": np.array([r[2] for r in rows], dtype=np.int64),
        "speaker_names": np.array(speakers),
        "config": np.array([asdict(cfg)[k] for k in ("sample_rate", "n_fft", "hop", "n_mels",
                                                      "frames", "floor_db")], dtype=np.float64),
    }


def write_npz(arrays: dict[str, np.ndarray], out: Path) -> None:
    """Compressed npz; numpy stamps zip entries with a fixed date, so reruns give equal bytes."""
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)  # type: ignore[arg-type]  # numpy stubs type **kwds as allow_pickle
    out.write_bytes(buf.getvalue())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recordings", type=Path, help="folder of FSDD .wav files")
    parser.add_argument("out", type=Path, help="npz file to write")
    args = parser.parse_args(argv)
    arrays = convert(args.recordings)
    write_npz(arrays, args.out)
    print(f"{len(arrays['labels'])} recordings -> {args.out} ({args.out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
