"""Text vectors for training and evaluating the gate, cached on disk by text.

The gate's training rows share many texts (a BFCL function is offered with dozens
of questions); each distinct text is embedded once, ever: the cache is a ``.npz``
of texts and vectors, grown by each run (``.cache/gate/`` is gitignored).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from retriever.embedder import Encoder, Vectors

CACHE = Path(".cache/gate/vectors.npz")
#: Texts per forward pass: short texts, so bigger batches pay off on CPU.
BATCH = 64


def cached_vectors(
    encoder: Encoder, texts: Sequence[str], cache: Path, *, progress: bool = True
) -> dict[str, Vectors]:
    """A vector for each distinct text, embedding only those the cache lacks."""
    known = _read(cache, encoder.name)
    missing = sorted({t for t in texts if t not in known}, key=len)
    if missing:
        bar = _progress(len(missing), "embedding") if progress else None
        for start in range(0, len(missing), BATCH):
            batch = missing[start : start + BATCH]
            for text, vector in zip(batch, encoder.encode(batch), strict=True):
                known[text] = vector
            if bar is not None:
                bar(len(batch))
            if start // BATCH % 10 == 9:  # a killed run keeps most of its work
                _write(cache, encoder.name, known)
        _write(cache, encoder.name, known)
        if progress:
            print(file=sys.stderr)
    return known


def _read(cache: Path, model: str) -> dict[str, Vectors]:
    if not cache.is_file():
        return {}
    with np.load(cache, allow_pickle=False) as data:
        if str(data["model"]) != model:
            return {}
        return dict(zip(data["texts"].tolist(), data["vectors"], strict=True))


def _write(cache: Path, model: str, vectors: dict[str, Vectors]) -> None:
    cache.parent.mkdir(parents=True, exist_ok=True)
    texts = list(vectors)
    partial = cache.with_suffix(".tmp.npz")
    np.savez(
        partial,
        model=np.array(model),
        texts=np.array(texts),
        vectors=np.stack([vectors[t] for t in texts]).astype(np.float32),
    )
    partial.replace(cache)


def _progress(total: int, label: str) -> _Bar:
    return _Bar(total, label)


class _Bar:
    """A one-line progress counter on stderr (no dependency for a training command)."""

    def __init__(self, total: int, label: str) -> None:
        self.total, self.done, self.label = total, 0, label

    def __call__(self, step: int) -> None:
        self.done += step
        print(f"\r{self.label}: {self.done}/{self.total}", end="", file=sys.stderr, flush=True)
