"""Reranking a first stage's candidates by late interaction (token-level MaxSim)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from retriever.config import RetrieverConfig
    from retriever.rerank.reranker import Reranker


def load_reranker(config: RetrieverConfig) -> Reranker | None:
    """The reranker ``config`` asks for (one per weights, folder and threads in a process),
    or None with ``rerank`` off. A missing or bad weights file is ``AdapterError``; a
    graph that cannot be exported is ``ModelExportFailed``."""
    if not config.rerank:
        return None
    return _shared(
        config.model_path,
        config.rerank_path,
        config.onnx_folder(),
        config.cpu_threads,
        config.rerank_first_stage_weight,
    )


@lru_cache(maxsize=4)
def _shared(
    model: Path | None, weights: Path | None, folder: Path, threads: int, first_stage: float
) -> Reranker:
    from retriever.embedder import bundled_model_path
    from retriever.rerank.reranker import Reranker
    from retriever.rerank.weights import load_weights

    return Reranker(
        model or bundled_model_path(),
        load_weights(weights),
        folder,
        first_stage_weight=first_stage,
        threads=threads,
    )
