"""Reciprocal rank fusion: ``score(d) = Σ w_r / (k + rank_r(d))`` over the rankings."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

Ranking = npt.NDArray[np.intp]


def top_k(scores: npt.NDArray[np.float32], k: int) -> Ranking:
    """Indices of the ``k`` highest scores, best first (ties by index)."""
    k = min(k, len(scores))
    if k <= 0:
        return np.zeros(0, dtype=np.intp)
    part = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
    order = np.lexsort((part, -scores[part]))
    ranked: Ranking = part[order]
    return ranked


def reciprocal_rank_fusion(
    rankings: Sequence[Ranking],
    k: int,
    *,
    constant: int = 60,
    weights: Sequence[float] | None = None,
) -> list[tuple[int, float]]:
    """The fused top ``k`` as (index, fused score), best first; ``weights`` scale each
    ranking's terms (equal when None)."""
    fused: dict[int, float] = {}
    for number, ranking in enumerate(rankings):
        weight = 1.0 if weights is None else weights[number]
        for rank, index in enumerate(ranking.tolist()):
            fused[index] = fused.get(index, 0.0) + weight / (constant + rank + 1)
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:k]
