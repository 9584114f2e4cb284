"""The hot path's dense search: one float32 matrix in process memory, kept in step with
the Qdrant collection (see :mod:`retriever.qdrant_store`), and beside it, for large
catalogs, an int8 copy that picks candidates (:mod:`retriever._int8_search`).

Over 47k x 384 the exact float32 product took about 16 ms a query on this machine; the
int8 pass reads a quarter of the bytes and the candidates it keeps
(:data:`RESCORED`, or four times ``k`` when more) are scored exactly, so the scores
returned are always the float32 ones and only the choice of candidates is approximate
(retriever/README.md, "Latency", measures what that costs in recall).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from retriever._int8_search import Int8Matrix
from retriever.embedder import Vectors
from retriever.fusion import top_k

log = logging.getLogger(__name__)

Mask = npt.NDArray[np.bool_]

#: Rows from which the int8 pass is used; below it the exact product is already cheap.
COMPRESS_FROM = 8192

#: Candidates the int8 pass hands to the exact scoring (at least; 4 x k when larger).
RESCORED = 256


class DenseMatrix:
    def __init__(self, vectors: Vectors, *, compress: bool | None = None) -> None:
        """``compress``: search through an int8 copy first; None decides by size (and
        by whether onnxruntime is installed)."""
        self._matrix = np.ascontiguousarray(vectors, dtype=np.float32)
        wanted = len(self._matrix) >= COMPRESS_FROM if compress is None else compress
        self._int8 = _int8_copy(self._matrix) if wanted and len(self._matrix) else None
        #: Full products :meth:`scores` computed (tests and benchmarks read it: a caller
        #: wanting a few rows' scores should not pay for every row).
        self.full_products = 0
        #: Searches that went through the int8 copy (tests read it).
        self.int8_passes = 0

    def __len__(self) -> int:
        return int(self._matrix.shape[0])

    @property
    def matrix(self) -> Vectors:
        return self._matrix

    @property
    def compressed(self) -> bool:
        return self._int8 is not None

    def scores(self, query: Vectors) -> npt.NDArray[np.float32]:
        """Cosine similarity of every row with a normalised query (exact)."""
        self.full_products += 1
        return self._product(query)

    def score_of(self, query: Vectors, row: int) -> float:
        """Cosine similarity of one row with a normalised float32 query (exact), its best
        with several query rows (a text and its clauses): over 47k rows the full product
        costs 3.7 ms idle (7 ms of CPU at load 17), one row a microsecond."""
        if query.ndim == 1:
            return float(self._matrix[row] @ query)
        return float(np.max(query @ self._matrix[row]))

    def best_of(self, query: Vectors, rows: npt.NDArray[np.intp]) -> npt.NDArray[np.float32]:
        """Exact cosine of each of ``rows`` with a normalised query, or with the best of
        several query rows (a text and its clauses): a few hundred rows, not the matrix."""
        queries = np.atleast_2d(query).astype(np.float32)
        if not len(rows):
            return np.zeros(0, dtype=np.float32)
        best: npt.NDArray[np.float32] = (self._matrix[rows] @ queries.T).max(axis=1)
        return best

    def _product(self, query: Vectors) -> npt.NDArray[np.float32]:
        scores: npt.NDArray[np.float32] = self._matrix @ query.astype(np.float32)
        return scores

    def search(self, query: Vectors, k: int, mask: Mask | None = None) -> list[tuple[int, float]]:
        """The ``k`` rows most similar to ``query`` among those ``mask`` keeps, best first,
        with their exact scores. With several query rows (a text and its clauses,
        :mod:`retriever.clauses`) a row's score is its best over them, and the int8 pass
        reads the matrix once for all of them: each query row's own candidates are
        rescored against every query row."""
        rows = np.atleast_2d(query).astype(np.float32)
        wanted = max(RESCORED, 4 * k)
        if self._int8 is None or 2 * wanted * len(rows) >= len(self._matrix):
            # the int8 pass would hand half the matrix or more to the exact scoring: a
            # catalog's question rows just past COMPRESS_FROM, searched 300 deep for four
            # query rows, took 16.3 ms that way against 13.6 ms exact (load 10.6)
            return self._exact(rows, k, mask)
        self.int8_passes += 1
        approximate = np.atleast_2d(self._int8.scores(rows))
        if mask is not None:
            approximate = np.where(mask, approximate, -np.inf).astype(np.float32)
        candidates = np.unique(np.concatenate([top_k(line, wanted) for line in approximate]))
        candidates = candidates[np.isfinite(approximate[:, candidates].max(axis=0))]
        exact = (self._matrix[candidates] @ rows.T).max(axis=1)
        order = top_k(exact, k)
        return [(int(candidates[i]), float(exact[i])) for i in order]

    def _exact(self, rows: Vectors, k: int, mask: Mask | None) -> list[tuple[int, float]]:
        scores = (self._matrix @ rows.T).max(axis=1)
        if mask is not None:
            scores = np.where(mask, scores, -np.inf).astype(np.float32)
        ranked = top_k(scores, k)
        return [(int(i), float(scores[i])) for i in ranked if np.isfinite(scores[i])]


def _int8_copy(matrix: Vectors) -> Int8Matrix | None:
    try:
        return Int8Matrix(matrix)
    except ImportError:
        log.info("onnxruntime or onnx is not installed: dense search stays exact float32")
        return None


def mask_for(values: Sequence[str], wanted: str | None) -> Mask | None:
    if wanted is None:
        return None
    # "Database" and "database" are one category to a reader (a ToolBench category and
    # a pack's): the catalog's spelling is not the user's or the model's to guess.
    folded = wanted.casefold()
    mask: Mask = np.fromiter(
        (v.casefold() == folded for v in values), dtype=np.bool_, count=len(values)
    )
    return mask
