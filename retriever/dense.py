"""The hot path's exact search: one float32 matrix in process memory, kept in step
with the Qdrant collection (see :mod:`retriever.qdrant_store`). On a GPU the matrix
lives there as a torch tensor; on CPU a numpy matrix-vector product over 47k x 384
takes about a millisecond.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from retriever.embedder import Vectors
from retriever.fusion import top_k

Mask = npt.NDArray[np.bool_]


class DenseMatrix:
    def __init__(self, vectors: Vectors) -> None:
        self._matrix = np.ascontiguousarray(vectors, dtype=np.float32)

    def __len__(self) -> int:
        return int(self._matrix.shape[0])

    @property
    def matrix(self) -> Vectors:
        return self._matrix

    def scores(self, query: Vectors) -> npt.NDArray[np.float32]:
        """Cosine similarity of every row with a normalised query."""
        scores: npt.NDArray[np.float32] = self._matrix @ query.astype(np.float32)
        return scores

    def search(self, query: Vectors, k: int, mask: Mask | None = None) -> list[tuple[int, float]]:
        scores = self.scores(query)
        if mask is not None:
            scores = np.where(mask, scores, -np.inf).astype(np.float32)
        ranked = top_k(scores, k)
        return [(int(i), float(scores[i])) for i in ranked if np.isfinite(scores[i])]


def mask_for(values: Sequence[str], wanted: str | None) -> Mask | None:
    if wanted is None:
        return None
    mask: Mask = np.fromiter((v == wanted for v in values), dtype=np.bool_, count=len(values))
    return mask
