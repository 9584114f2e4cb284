"""The in-process index on disk: its documents and vectors in one ``.npz``, so that a
restart serves the catalog before Qdrant is even imported.

Opening Qdrant's local mode reads every point of the collection, and importing
``qdrant_client`` alone took about 4.5 s of a profiled start at load 10; the catalog's
sync against the store (what changed since the last run) needs both. A snapshot of
the index the last sync produced lets a restart be ready first and sync after, in the
background. Only rows whose tool id and text digest match the documents the store
gives now are kept: a changed or new tool waits for the sync, a removed one is gone.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np

from retriever.config import RetrieverConfig
from retriever.documents import ToolDocument
from retriever.index import ToolIndex

log = logging.getLogger(__name__)


def snapshot_path(data_dir: Path, catalog: str, model: str) -> Path:
    """The snapshot of ``catalog``'s index as embedded by ``model``."""
    slug = re.sub(r"[^a-z0-9]+", "-", f"{catalog}-{model}".lower()).strip("-")
    return data_dir / "index-snapshots" / f"{slug[:200]}.npz"


def save_snapshot(path: Path, index: ToolIndex) -> None:
    """Write ``index``'s documents and vectors to ``path`` (replaced in one rename, so
    a reader sees the old file or the new one)."""
    documents = json.dumps([asdict(doc) for doc in index.documents]).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.part.npz")
    np.savez(
        partial,
        vectors=index.dense.matrix,
        documents=np.frombuffer(documents, dtype=np.uint8),
    )
    partial.replace(path)


def load_snapshot(
    path: Path, documents: Sequence[ToolDocument], config: RetrieverConfig
) -> ToolIndex | None:
    """The index of those of ``documents`` the snapshot at ``path`` holds unchanged, in
    their order; None without a usable snapshot or with none of them in it."""
    try:
        with np.load(path) as data:
            vectors, raw = data["vectors"], data["documents"]
        kept = json.loads(raw.tobytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError) as exc:  # a torn or foreign file: sync instead
        log.warning("the index snapshot %s is unreadable: %s", path, exc)
        return None
    rows = {(doc["id"], doc["digest"]): i for i, doc in enumerate(kept)}
    found = [(doc, rows.get((doc.id, doc.digest))) for doc in documents]
    taken = [(doc, row) for doc, row in found if row is not None]
    if not taken or len(vectors) != len(kept):
        return None
    return ToolIndex(
        [doc for doc, _ in taken],
        vectors[[row for _, row in taken]],
        lexical=config.fusion,
        rrf_k=config.rrf_k,
        dense_weight=config.dense_weight,
    )
