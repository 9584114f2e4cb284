"""What the leave-one-dataset-out experiments share: the training sets as
:class:`~eval.retrieval_learned.EvalSet`, each fold's adapter (trained on the other
seven sets, cached so the experiments train it once), and the shipped hybrid ranking.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retriever.adapter import Adapter
from retriever.embedder import Vectors
from retriever.finetune.adapter import AdapterSettings, train_adapter
from retriever.finetune.data import EmbeddedSet
from retriever.fusion import reciprocal_rank_fusion, top_k
from retriever.index import FUSION_DEPTH
from retriever.lexical import BM25Index

#: The shipped fusion weight (``retriever.dense_weight``).
SHIPPED_WEIGHT = 0.8


def fold_matrix(sets: Sequence[EmbeddedSet], left_out: str, cache_dir: Path) -> Vectors:
    """The shipped adapter's settings trained on every set but ``left_out`` (cached)."""
    rest = [s for s in sets if s.name != left_out]
    # Named by the sets it was trained on, so a run over fewer sets never reuses it.
    path = cache_dir / "folds" / f"adapter-{'+'.join(sorted(s.name for s in rest))}.npy"
    if path.is_file():
        cached: Vectors = np.load(path)
        return cached
    matrix = train_adapter(rest, AdapterSettings(), progress=False).matrix
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, matrix)
    return matrix


def mapped(vectors: Vectors, matrix: Vectors | None) -> Vectors:
    return vectors if matrix is None else Adapter(matrix, "", "").apply(vectors)


def dense_top(queries: Vectors, docs: Vectors) -> list[np.ndarray[Any, Any]]:
    return [top_k(row, FUSION_DEPTH) for row in queries @ docs.T]


def bm25_top(index: BM25Index, texts: Sequence[str]) -> list[np.ndarray[Any, Any]]:
    tops = []
    for text in texts:
        scores = index.scores(text)
        tops.append(np.asarray([i for i in top_k(scores, FUSION_DEPTH) if scores[i] > 0]))
    return tops


def hybrid(
    dense: np.ndarray[Any, Any], lexical: np.ndarray[Any, Any], weight: float = SHIPPED_WEIGHT
) -> np.ndarray[Any, Any]:
    """The index's hybrid ranking: weighted RRF of the dense and BM25 rankings."""
    if not len(lexical):
        return dense
    pair = (2 * weight, 2 * (1 - weight))
    fused = reciprocal_rank_fusion([dense, lexical], FUSION_DEPTH, weights=pair)
    return np.asarray([i for i, _ in fused])
