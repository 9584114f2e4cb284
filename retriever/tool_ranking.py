"""How select mode orders a client's tools: as the catalog's search orders the catalog.

The client's tools become a small :class:`~retriever.index.ToolIndex`, built from the
same settings as the catalog's (``fusion_method``, ``dense_weight``, ``bm25_k1``,
``bm25_b``), and searched as the catalog is: the dense side scores each tool by its best
cosine over the query and its clauses (:mod:`retriever.clauses`), BM25 reads the whole
query, and the two are fused. With ``retriever.select_fusion`` off, or ``fusion`` off,
the order is the cosine's alone. Select mode does not rerank.

A client sends the same tools every turn, so each list's BM25 index and documents are
kept (the last :data:`LISTS_KEPT` lists, by their documents' text): building them took
1.2 ms for 50 CallNavi tools and 21 ms for 300 (load 13 on two cores), searching a kept
one 0.2 and 0.5 ms. At 1,000 tools the ranking of a kept list took 0.9 ms (0.09 ms by
the cosine alone, load 15); making its documents again each turn had cost 3 ms more.
:meth:`ToolRanker.prepare` builds them where the caller checks a long list, on a worker
thread, so the event loop pays only the search.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from retriever.clauses import best_scores
from retriever.config import RetrieverConfig
from retriever.documents import ToolDocument
from retriever.embedder import Vectors
from retriever.index import ToolIndex
from retriever.lexical import BM25Index

#: Tool lists whose BM25 index is kept (a few KB each for hundreds of tools).
LISTS_KEPT = 64


@dataclass(frozen=True)
class Ranking:
    """Every tool's row, best first, and each tool's cosine with the query (its best over
    the query's rows), which ``retriever.select_threshold`` reads."""

    order: list[int]
    cosines: Vectors


class ToolRanker:
    def __init__(self, config: RetrieverConfig) -> None:
        self._config = config.model_copy(update={"rerank": False})
        self._fused = config.select_fusion and config.fusion
        self._lists: OrderedDict[bytes, _Kept] = OrderedDict()
        self._lock = threading.Lock()  # prepare() runs on worker threads

    def prepare(self, texts: Sequence[str]) -> None:
        """Build the BM25 index of the list ``texts`` now, if the ranking will read one."""
        if self._fused and texts:
            self._kept(texts)

    def rank(self, query: Vectors, text: str, texts: Sequence[str], vectors: Vectors) -> Ranking:
        """The tools of ``texts`` (embedded as ``vectors``) for the query ``text``, whose
        rows are ``query`` (one, or the whole text's then its clauses')."""
        cosines = best_scores(vectors, query)
        dense = [int(i) for i in np.argsort(-cosines, kind="stable")]
        if not self._fused or not texts:
            return Ranking(dense, cosines)
        kept = self._kept(texts)
        index = ToolIndex.from_config(kept.documents, vectors, self._config, bm25=kept.bm25)
        hits = [int(hit.id) for hit in index.search(query, text, len(texts), rerank=False)]
        found = set(hits)
        # Past the fusion's depth a tool neither side ranked keeps its cosine's place.
        return Ranking([*hits, *(i for i in dense if i not in found)], cosines)

    def _kept(self, texts: Sequence[str]) -> _Kept:
        key = hashlib.blake2b("\x00".join(texts).encode(), digest_size=16).digest()
        with self._lock:
            kept = self._lists.get(key)
            if kept is not None:
                self._lists.move_to_end(key)
                return kept
        documents = [ToolDocument(str(i), "", "", "", doc, "") for i, doc in enumerate(texts)]
        bm25 = BM25Index(texts, k1=self._config.bm25_k1, b=self._config.bm25_b)
        kept = _Kept(documents, bm25)
        with self._lock:
            self._lists[key] = kept
            if len(self._lists) > LISTS_KEPT:
                self._lists.popitem(last=False)
        return kept


@dataclass(frozen=True)
class _Kept:
    """A list's documents (as the index holds them, named by their row) and BM25 index."""

    documents: list[ToolDocument]
    bm25: BM25Index
