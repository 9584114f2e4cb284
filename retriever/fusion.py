"""Reciprocal rank fusion: ``score(d) = Σ 1 / (k + rank_r(d))`` over the rankings."""

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
    rankings: Sequence[Ranking], k: int, *, constant: int = 60
) -> list[tuple[int, float]]:
    """The fused top ``k`` as (index, fused score), best first."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, index in enumerate(ranking.tolist()):
            fused[index] = fused.get(index, 0.0) + 1.0 / (constant + rank + 1)
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:k]
