"""Embedding many documents at once: sorted by length, in batches, with a progress
bar, and cached on disk per model so that a second run embeds only new texts.

The cache is one ``.npz`` per model under the cache folder (``keys``: a digest per
text, ``vectors``), written every few thousand texts so an interrupted run keeps most
of its work.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import numpy as np
from tqdm import tqdm

from retriever.embedder import Encoder, Vectors

_SAVE_EVERY = 4096


def text_key(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


class DiskCache:
    def __init__(self, folder: Path, model: str) -> None:
        slug = re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")
        self.path = folder / f"{slug}.npz"
        self.vectors: dict[str, Vectors] = {}
        if self.path.is_file():
            with np.load(self.path) as data:
                keys, matrix = data["keys"], data["vectors"]
            self.vectors = {str(key): matrix[i] for i, key in enumerate(keys)}

    def save(self) -> None:
        if not self.vectors:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys = np.asarray(list(self.vectors), dtype=str)
        matrix = np.stack(list(self.vectors.values()))
        # One partial file per process: workers filling their folders may save at once.
        partial = self.path.with_suffix(f".{os.getpid()}.part.npz")
        np.savez(partial, keys=keys, vectors=matrix)
        partial.replace(self.path)


def cached_vectors(encoder: Encoder, texts: list[str], cache_dir: Path) -> list[Vectors | None]:
    """The vectors of ``texts`` that :func:`embed_documents` left in ``cache_dir``, None
    where a text was never embedded; nothing is embedded. An adapted encoder's come from
    its base model's cache through the adapter, as :func:`embed_documents` stores them."""
    from retriever.adapter import AdaptedEncoder

    if isinstance(encoder, AdaptedEncoder):
        base = cached_vectors(encoder.base, texts, cache_dir)
        return [None if row is None else encoder.adapter.apply(row[None])[0] for row in base]
    known = DiskCache(cache_dir, encoder.name).vectors
    return [known.get(text_key(text)) for text in texts]


def embed_documents(
    encoder: Encoder,
    texts: list[str],
    *,
    cache_dir: Path | None = None,
    batch_size: int = 32,
    progress: bool = True,
    label: str = "embedding documents",
) -> Vectors:
    """One normalised row per text; texts already in the disk cache are not embedded.

    An adapted encoder's vectors are its base encoder's (cached under the base model's
    name) mapped through the adapter, so a new adapter re-embeds nothing."""
    from retriever.adapter import AdaptedEncoder

    if isinstance(encoder, AdaptedEncoder):
        base = embed_documents(
            encoder.base,
            texts,
            cache_dir=cache_dir,
            batch_size=batch_size,
            progress=progress,
            label=label,
        )
        return encoder.adapter.apply(base)
    cache = DiskCache(cache_dir, encoder.name) if cache_dir is not None else None
    known = cache.vectors if cache is not None else {}
    keys = [text_key(text) for text in texts]
    todo = sorted(
        {k: t for k, t in zip(keys, texts, strict=True) if k not in known}.items(),
        key=lambda item: len(item[1]),
    )
    fresh: dict[str, Vectors] = {}
    since_save = 0
    with tqdm(total=len(todo), desc=label, unit="doc", disable=not progress or not todo) as bar:
        for start in range(0, len(todo), batch_size):
            batch = todo[start : start + batch_size]
            vectors = encoder.encode([text for _, text in batch])
            for (key, _), vector in zip(batch, vectors, strict=True):
                fresh[key] = vector
            bar.update(len(batch))
            since_save += len(batch)
            if cache is not None and since_save >= _SAVE_EVERY:
                cache.vectors.update(fresh)
                cache.save()
                since_save = 0
    if cache is not None and fresh:
        cache.vectors.update(fresh)
        cache.save()
    everything = {**known, **fresh}
    if not texts:
        return np.zeros((0, encoder.dim), dtype=np.float32)
    matrix: Vectors = np.stack([everything[key] for key in keys]).astype(np.float32)
    return matrix
