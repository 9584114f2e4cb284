"""Ranking metrics, one definition for the evaluation and for the proxy's own checks
(the learned retrieval's held-out comparison, :mod:`proxy.learning.retrieval`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


def recall_at(ranked: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    """The share of ``relevant`` found in the first ``k`` of ``ranked``."""
    return len(set(ranked[:k]) & set(relevant)) / len(relevant)


def ndcg_at(ranked: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    """NDCG@k with graded gains (``relevant`` maps a document to its gain); 0 when
    nothing is relevant."""
    dcg = sum(relevant.get(doc, 0) / math.log2(i + 2) for i, doc in enumerate(ranked[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(gain / math.log2(i + 2) for i, gain in enumerate(ideal))
    return dcg / idcg if idcg else 0.0
