"""The two text corpora of the language models, packed into the package, and their shared vocabulary.

* ``shakespeare``: tiny-shakespeare (``models/data/tinyshakespeare.npz``, a compressed uint8 array
  of the upstream ``input.txt``; Andrej Karpathy, char-rnn, data/tinyshakespeare, MIT).
* ``python``: Python source files of the CPython 3.11 standard library
  (``models/data/python-stdlib.npz``; PSF License, see ``models/data/ATTRIBUTION.md``), made by
  ``pack_python_stdlib``.

Every model reads both through one character vocabulary, ``SHARED_VOCAB`` (printable ASCII, newline
and tab, in code-point order), so a token id means the same character for every candidate of the
``lm`` family and a planner can hand one prompt to any of them. Each corpus is split 90/10: the
first 90 % trains, the held-out last 10 % evaluates and feeds the prompts.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parent.parent / "data"
CORPUS_FILE = DATA / "tinyshakespeare.npz"
PYTHON_FILE = DATA / "python-stdlib.npz"
SOURCE = ("tiny-shakespeare (1,115,394 characters), from Andrej Karpathy's char-rnn "
          "(github.com/karpathy/char-rnn, data/tinyshakespeare), MIT licence")
PYTHON_SOURCE = ("Python 3.11.7 standard library sources (Lib/*.py, concatenated in name order), "
                 "Python Software Foundation License")
VAL_FRACTION = 0.1
TASKS: dict[str, Path] = {"shakespeare": CORPUS_FILE, "python": PYTHON_FILE}
PYTHON_CHARS = 1_100_000  # about the size of tiny-shakespeare, so neither task dominates by volume


def pack_corpus(src: Path, dst: Path = CORPUS_FILE) -> int:
    """Store ``src`` (the upstream input.txt) as a compressed byte array; returns its length."""
    data = np.frombuffer(Path(src).read_bytes(), dtype=np.uint8)
    dst.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(dst, text=data)
    return int(data.size)


def pack_python_stdlib(lib_dir: Path, dst: Path = PYTHON_FILE, limit: int = PYTHON_CHARS) -> list[str]:
    """Concatenate the standard library's top-level public modules (``Lib/[a-z]*.py``, name order)
    until ``limit`` characters, characters outside the shared vocabulary replaced by ``?``; store
    them and the file names. Returns the names packed."""
    allowed = set(SHARED_VOCAB.chars)
    parts: list[str] = []
    names: list[str] = []
    size = 0
    for path in sorted(Path(lib_dir).glob("[a-z]*.py")):
        if path.name == "this.py":  # rot13 prose, not Python style
            continue
        text = path.read_text(encoding="utf-8")
        text = "".join(c if c in allowed else "?" for c in text)
        parts.append(text)
        names.append(path.name)
        size += len(text)
        if size >= limit:
            break
    body = "\n".join(parts)[:limit]
    dst.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(dst, text=np.frombuffer(body.encode("ascii"), dtype=np.uint8),
                        files=np.array(names))
    return names


def load_text(path: Path = CORPUS_FILE) -> str:
    with np.load(path) as z:
        return bytes(z["text"]).decode("utf-8")


@dataclass(frozen=True)
class Vocab:
    """Character vocabulary: token id = index in ``chars``."""

    chars: tuple[str, ...]

    @classmethod
    def from_text(cls, text: str) -> Vocab:
        return cls(tuple(sorted(set(text))))

    @property
    def size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> np.ndarray:
        index = {c: i for i, c in enumerate(self.chars)}
        try:
            return np.fromiter((index[c] for c in text), dtype=np.int64, count=len(text))
        except KeyError as exc:
            raise ValueError(f"character {exc.args[0]!r} is not in the vocabulary") from None

    def decode(self, ids: np.ndarray) -> str:
        return "".join(self.chars[int(i)] for i in np.asarray(ids).ravel() if 0 <= int(i) < self.size)


# Tab, newline, then printable ASCII (space .. tilde): 97 characters, ids in code-point order.
SHARED_VOCAB = Vocab(("\t", "\n", *(chr(c) for c in range(32, 127))))


@dataclass(frozen=True)
class Corpus:
    vocab: Vocab
    train: np.ndarray  # int64 token ids, the first 90 %
    val: np.ndarray    # the held-out last 10 %, never trained on


@cache
def load_corpus(path: Path = CORPUS_FILE) -> Corpus:
    """One corpus encoded with the shared vocabulary (cached: encoding a million characters takes
    a noticeable fraction of a second)."""
    ids = SHARED_VOCAB.encode(load_text(path))
    cut = int(len(ids) * (1 - VAL_FRACTION))
    return Corpus(SHARED_VOCAB, ids[:cut], ids[cut:])


def load_task(task: str) -> Corpus:
    """The corpus of a task (``shakespeare`` or ``python``)."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r} (known: {', '.join(TASKS)})")
    return load_corpus(TASKS[task])
