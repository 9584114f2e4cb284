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
import numpy.typing as npt

from retriever.config import FusionMethod, RetrieverConfig
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
        bm25_k1: float = 0.9,
        bm25_b: float = 0.4,
        fusion: FusionMethod = "rrf",
    ) -> None:
        """``bm25``: the BM25 index of exactly these documents' texts, in this order,
        built before (an index snapshot's) with ``bm25_k1`` and ``bm25_b``; else it is built
        here when ``lexical``."""
        if len(documents) != len(vectors):
            raise ValueError(f"{len(documents)} documents but {len(vectors)} vectors")
        if bm25 is not None and len(bm25) != len(documents):
            raise ValueError(f"{len(documents)} documents but a BM25 index of {len(bm25)}")
        self.documents = list(documents)
        self.dense = DenseMatrix(vectors)
        if bm25 is not None and (bm25.k1, bm25.b) != (bm25_k1, bm25_b):
            bm25 = None  # built under other settings (an older snapshot's): built again
        if not lexical:
            self.bm25 = None
        else:
            texts = [doc.text for doc in documents]
            self.bm25 = bm25 if bm25 is not None else BM25Index(texts, k1=bm25_k1, b=bm25_b)
        self._rrf_k = rrf_k
        # Fusion weights of the dense and BM25 rankings; 0.5 each is plain RRF.
        self._weights = (2 * dense_weight, 2 * (1 - dense_weight))
        self._dense_weight = dense_weight
        self._fusion: FusionMethod = fusion
        self._categories = [doc.category for doc in documents]
        self._groups = [doc.group for doc in documents]
        self._masks: dict[tuple[str, str], Mask] = {}

    @classmethod
    def from_config(
        cls,
        documents: Sequence[ToolDocument],
        vectors: Vectors,
        config: RetrieverConfig,
        *,
        bm25: BM25Index | None = None,
    ) -> ToolIndex:
        """The index a request searches: fusion and BM25 as ``config`` sets them (the proxy's
        catalog, its snapshot and ``toolgraph eval retrieval`` all build it here)."""
        return cls(
            documents,
            vectors,
            bm25=bm25,
            lexical=config.fusion,
            rrf_k=config.rrf_k,
            dense_weight=config.dense_weight,
            bm25_k1=config.bm25_k1,
            bm25_b=config.bm25_b,
            fusion=config.fusion_method,
        )

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
        if self._fusion == "scores":
            return self._hits(self._fuse_scores(query_vector, dense, query_text, k, mask))
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

    def _fuse_scores(
        self,
        query: Vectors,
        dense: Sequence[tuple[int, float]],
        text: str,
        k: int,
        mask: Mask | None,
    ) -> list[tuple[int, float]]:
        """``w * cosine / best cosine + (1 - w) * BM25 / best BM25`` over the two rankings'
        top :data:`FUSION_DEPTH`. Each candidate's cosine is exact (its best query row), BM25's
        own hits included, so a tool BM25 ranks first still counts its similarity; ties by
        row. Chosen over RRF leave-one-dataset-out (retriever/README.md, "Issue 13 item 1, third
        pass")."""
        words = self._lexical_scores(text, mask)
        found = [i for i in top_k(words, FUSION_DEPTH) if words[i] > 0]
        rows = np.unique(np.asarray([i for i, _ in dense] + found, dtype=np.intp))
        similarity = self.dense.best_of(query, rows)
        top = float(similarity.max()) if len(rows) else 0.0
        fused = self._dense_weight * similarity / max(top, 1e-6)
        best_words = float(words.max()) if len(words) else 0.0
        if best_words > 0:
            fused = fused + (1 - self._dense_weight) * words[rows] / best_words
        return [(int(rows[i]), float(fused[i])) for i in top_k(fused.astype(np.float32), k)]

    def _lexical_scores(self, text: str, mask: Mask | None) -> npt.NDArray[np.float32]:
        """BM25's score of every row (zero where ``mask`` drops it, or without BM25)."""
        if self.bm25 is None:
            return np.zeros(len(self.documents), dtype=np.float32)
        scores = self.bm25.scores(text)
        if mask is not None:
            scores = np.where(mask, scores, 0.0).astype(np.float32)
        return scores

    def _lexical(self, text: str, k: int, mask: Mask | None) -> list[tuple[int, float]]:
        if self.bm25 is None:
            return []
        scores = self._lexical_scores(text, mask)
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
