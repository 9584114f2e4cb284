"""In-process search over a catalog's documents: exact dense, BM25, and their fusion.

:class:`ToolIndex` is what a request searches. It is built from documents and their
vectors (from Qdrant at start-up, or straight from the embedder in an evaluation);
filters by category or group are boolean masks over the same rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt

from retriever.config import FusionMethod, RetrieverConfig
from retriever.dense import DenseMatrix, Mask, mask_for
from retriever.documents import ToolDocument
from retriever.embedder import Vectors
from retriever.fusion import reciprocal_rank_fusion, top_k
from retriever.lexical import BM25Index

if TYPE_CHECKING:
    from retriever.rerank.reranker import Reranker

Method = Literal["dense", "bm25", "hybrid"]

#: Filter masks kept (one bool per tool each: 47 kB at 47k tools).
_MASKS_KEPT = 256

#: Depth of each ranking that fusion looks at.
FUSION_DEPTH = 100

#: First-stage candidates the reranker reads (``retriever.rerank``).
RERANK_DEPTH = 30


@dataclass(frozen=True, slots=True)
class Hit:
    id: str
    name: str
    category: str
    group: str
    score: float


@dataclass(frozen=True)
class ExtraRows:
    """More rows of some tools (the questions they answer, :mod:`retriever.expansion`):
    their vectors and, for each, the row of the tool it belongs to. A tool's cosine is
    then its best row's."""

    vectors: Vectors
    owners: npt.NDArray[np.intp]


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
        extra: ExtraRows | None = None,
        reranker: Reranker | None = None,
    ) -> None:
        """``extra``: more rows of the tools (their vectors and owners); ``reranker``:
        what reorders a hybrid search's first :data:`RERANK_DEPTH` candidates. ``bm25``:
        the BM25 index of exactly these documents' texts, in this order, built before (an
        index snapshot's) with ``bm25_k1`` and ``bm25_b``; else it is built here when
        ``lexical``."""
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
        self.reranker = reranker
        self._row_of_id = {doc.id: i for i, doc in enumerate(self.documents)}
        self._extra: DenseMatrix | None = None
        self._owners = np.zeros(0, dtype=np.intp)
        # The extra rows by owner: those of tool i are _by_owner[_bounds[i]:_bounds[i + 1]].
        self._by_owner = np.zeros(0, dtype=np.intp)
        self._bounds = np.zeros(len(documents) + 1, dtype=np.intp)
        if extra is not None and len(extra.owners):
            if len(extra.vectors) != len(extra.owners):
                raise ValueError(f"{len(extra.vectors)} extra rows but {len(extra.owners)} owners")
            self._extra = DenseMatrix(extra.vectors)
            self._owners = np.asarray(extra.owners, dtype=np.intp)
            self._by_owner = np.argsort(self._owners, kind="stable").astype(np.intp)
            owned = self._owners[self._by_owner]
            self._bounds = np.searchsorted(owned, np.arange(len(documents) + 1)).astype(np.intp)

    @classmethod
    def from_config(
        cls,
        documents: Sequence[ToolDocument],
        vectors: Vectors,
        config: RetrieverConfig,
        *,
        bm25: BM25Index | None = None,
        extra: ExtraRows | None = None,
        reranker: Reranker | None = None,
    ) -> ToolIndex:
        """The index a request searches: fusion and BM25 as ``config`` sets them (the proxy's
        catalog, its snapshot and ``toolgraph eval retrieval`` all build it here); with
        ``config.rerank``, the shared reranker unless one is given."""
        if reranker is None and config.rerank:
            from retriever.rerank import load_reranker

            reranker = load_reranker(config)
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
            extra=extra,
            reranker=reranker,
        )

    def __len__(self) -> int:
        return len(self.documents)

    @property
    def extra(self) -> ExtraRows | None:
        """The tools' extra rows (their question rows); None without any."""
        if self._extra is None:
            return None
        return ExtraRows(self._extra.matrix, self._owners)

    def search(
        self,
        query_vector: Vectors | None,
        query_text: str,
        k: int,
        *,
        method: Method = "hybrid",
        category: str | None = None,
        group: str | None = None,
        rerank: bool = True,
        within: Mask | None = None,
    ) -> list[Hit]:
        """The top ``k`` tools (of the rows ``within`` holds, when given: a client's
        scope); a hybrid search with a :attr:`reranker` (and ``rerank``) reads the first
        stage's top :data:`RERANK_DEPTH` and reorders them."""
        mask = _combine(
            _combine(self._mask("category", category), self._mask("group", group)), within
        )
        if rerank and self.reranker is not None and method == "hybrid" and k <= RERANK_DEPTH:
            first = self._search(query_vector, query_text, RERANK_DEPTH, method, mask)
            return self.rerank(query_text, first)[:k]
        return self._search(query_vector, query_text, k, method, mask)

    def rerank(self, query_text: str, hits: Sequence[Hit]) -> list[Hit]:
        """``hits`` in the reranker's order, each scored by it (unchanged without one)."""
        if self.reranker is None or not hits:
            return list(hits)
        texts = [self.documents[self._row_of_id[hit.id]].text for hit in hits]
        scores = self.reranker.combined(query_text, texts, [hit.score for hit in hits])
        order = np.argsort(-scores, kind="stable")
        return [
            Hit(hits[i].id, hits[i].name, hits[i].category, hits[i].group, float(scores[i]))
            for i in order
        ]

    def _search(
        self,
        query_vector: Vectors | None,
        query_text: str,
        k: int,
        method: Method,
        mask: Mask | None,
    ) -> list[Hit]:
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
        (:meth:`DenseMatrix.search`); with extra rows, each tool by its best row."""
        found = self.dense.search(query, k, mask)
        if self._extra is None:
            return found
        extra_mask = None if mask is None else mask[self._owners]
        per_tool = max(1, len(self._owners) // max(1, len(self.documents)))
        extra = [row for row, _ in self._extra.search(query, k * per_tool, extra_mask)]
        own = [row for row, _ in found]
        rows = np.unique(np.concatenate([np.asarray(own, dtype=np.intp), self._owners[extra]]))
        exact = self._best_of(query, rows)
        return [(int(rows[i]), float(exact[i])) for i in top_k(exact, k)]

    def similarity_of(self, query: Vectors, row: int) -> float:
        """One tool's exact cosine (its best query row's): its document's, or with extra
        rows its best row's, as a search scores it."""
        own = self.dense.score_of(query, row)
        extra_rows = self._by_owner[self._bounds[row] : self._bounds[row + 1]]
        if self._extra is None or not len(extra_rows):
            return own
        return max(own, float(self._extra.best_of(query, extra_rows).max()))

    def _best_of(self, query: Vectors, rows: npt.NDArray[np.intp]) -> npt.NDArray[np.float32]:
        """Each of ``rows``' cosine: its document's, or its best row's with extra rows."""
        own = self.dense.best_of(query, rows)
        if self._extra is None or not len(rows):
            return own
        starts = self._bounds[rows]
        counts = self._bounds[rows + 1] - starts
        total = int(counts.sum())
        if not total:
            return own
        # each row's run of extra rows, laid end to end: one product, one reduceat
        ends = np.cumsum(counts)
        positions = np.repeat(starts - (ends - counts), counts) + np.arange(total)
        scores = self._extra.best_of(query, self._by_owner[positions])
        held = counts > 0
        best = own.copy()
        best[held] = np.maximum(own[held], np.maximum.reduceat(scores, (ends - counts)[held]))
        return best

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
        row. Chosen over RRF leave-one-dataset-out (retriever/README.md, "The default")."""
        words = self._lexical_scores(text, mask)
        found = [i for i in top_k(words, FUSION_DEPTH) if words[i] > 0]
        rows = np.unique(np.asarray([i for i, _ in dense] + found, dtype=np.intp))
        similarity = self._best_of(query, rows)
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
