"""In-process search over a catalog's documents: exact dense, BM25, and their fusion.

:class:`ToolIndex` is what a request searches. It is built from documents and their
vectors (from Qdrant at start-up, or straight from the embedder in an evaluation);
filters by category or group are boolean masks over the same rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from retriever.dense import DenseMatrix, Mask, mask_for
from retriever.documents import ToolDocument
from retriever.embedder import Vectors
from retriever.fusion import reciprocal_rank_fusion, top_k
from retriever.lexical import BM25Index

Method = Literal["dense", "bm25", "hybrid"]

#: Filter masks kept (one bool per tool each: 47 kB at 47k tools).
_MASKS_KEPT = 256

#: Depth of each ranking that fusion looks at.
FUSION_DEPTH = 100


@dataclass(frozen=True, slots=True)
class Hit:
    id: str
    name: str
    category: str
    group: str
    score: float


class ToolIndex:
    def __init__(
        self,
        documents: Sequence[ToolDocument],
        vectors: Vectors,
        *,
        lexical: bool = True,
        rrf_k: int = 60,
        dense_weight: float = 0.5,
        bm25: BM25Index | None = None,
    ) -> None:
        """``bm25``: the BM25 index of exactly these documents' texts, in this order,
        built before (an index snapshot's); else it is built here when ``lexical``."""
        if len(documents) != len(vectors):
            raise ValueError(f"{len(documents)} documents but {len(vectors)} vectors")
        if bm25 is not None and len(bm25) != len(documents):
            raise ValueError(f"{len(documents)} documents but a BM25 index of {len(bm25)}")
        self.documents = list(documents)
        self.dense = DenseMatrix(vectors)
        if not lexical:
            self.bm25 = None
        else:
            self.bm25 = bm25 if bm25 is not None else BM25Index([doc.text for doc in documents])
        self._rrf_k = rrf_k
        # Fusion weights of the dense and BM25 rankings; 0.5 each is plain RRF.
        self._weights = (2 * dense_weight, 2 * (1 - dense_weight))
        self._categories = [doc.category for doc in documents]
        self._groups = [doc.group for doc in documents]
        self._masks: dict[tuple[str, str], Mask] = {}

    def __len__(self) -> int:
        return len(self.documents)

    def search(
        self,
        query_vector: Vectors | None,
        query_text: str,
        k: int,
        *,
        method: Method = "hybrid",
        category: str | None = None,
        group: str | None = None,
    ) -> list[Hit]:
        mask = _combine(self._mask("category", category), self._mask("group", group))
        if method == "bm25" or (method == "hybrid" and query_vector is None):
            return self._hits(self._lexical(query_text, k, mask))
        assert query_vector is not None
        dense = self._dense(query_vector, FUSION_DEPTH if method == "hybrid" else k, mask)
        if method == "dense" or self.bm25 is None:
            return self._hits(dense[:k])
        lexical = self._lexical(query_text, FUSION_DEPTH, mask)
        rankings = [np.asarray([i for i, _ in dense], dtype=np.intp)]
        if lexical:
            rankings.append(np.asarray([i for i, _ in lexical], dtype=np.intp))
        fused = reciprocal_rank_fusion(rankings, k, constant=self._rrf_k, weights=self._weights)
        return self._hits(fused)

    def _dense(self, query: Vectors, k: int, mask: Mask | None) -> list[tuple[int, float]]:
        """The dense ranking; with several query rows (a text and its clauses,
        :mod:`retriever.clauses`), each tool scored by its best row, all rows in one pass
        (:meth:`DenseMatrix.search`)."""
        return self.dense.search(query, k, mask)

    def _mask(self, field: str, value: str | None) -> Mask | None:
        """Rows whose ``field`` is ``value``; the most recent masks are kept."""
        if value is None:
            return None
        key = (field, value)
        if key not in self._masks:
            values = self._categories if field == "category" else self._groups
            mask = mask_for(values, value)
            assert mask is not None
            if len(self._masks) >= _MASKS_KEPT:
                self._masks.pop(next(iter(self._masks)))
            self._masks[key] = mask
        return self._masks[key]

    def _lexical(self, text: str, k: int, mask: Mask | None) -> list[tuple[int, float]]:
        if self.bm25 is None:
            return []
        scores = self.bm25.scores(text)
        if mask is not None:
            scores = np.where(mask, scores, 0.0).astype(np.float32)
        return [(int(i), float(scores[i])) for i in top_k(scores, k) if scores[i] > 0]

    def _hits(self, ranked: Sequence[tuple[int, float]]) -> list[Hit]:
        hits = []
        for index, score in ranked:
            doc = self.documents[index]
            hits.append(Hit(doc.id, doc.name, doc.category, doc.group, score))
        return hits


def _combine(a: Mask | None, b: Mask | None) -> Mask | None:
    if a is None or b is None:
        return a if b is None else b
    combined: Mask = a & b
    return combined
