"""The catalog and candidate finder the planning evaluations plan over, built as the
proxy's planner builds its own (proxy/catalog/), so that ``toolgraph eval
plan`` (eval/plan_eval.py), the LLM run (eval/plan_llm.py) and the edge-trust fit
(eval/plan_trust.py) score what the proxy does."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from eval.plan_data import Dataset
from retriever.config import RetrieverConfig

if TYPE_CHECKING:
    from proxy.plan.candidates import CandidateFinder, GraphMode, GraphWeights
    from retriever.embedder import Encoder
    from retriever.index import ToolIndex


def build_index(
    data: Dataset,
    encoder: Encoder,
    *,
    cache_dir: Path | None,
    progress: bool,
    config: RetrieverConfig | None = None,
) -> ToolIndex:
    """The catalog's in-process index as the proxy builds it from ``config`` (documents,
    fusion, BM25; the shipped defaults when None), document vectors cached on disk."""
    from retriever.bulk import embed_documents
    from retriever.catalog import catalog_documents
    from retriever.index import ToolIndex

    config = config or RetrieverConfig()
    documents = catalog_documents(data.tools, config)
    vectors = embed_documents(
        encoder, [d.text for d in documents], cache_dir=cache_dir, progress=progress,
        label=f"embedding {len(documents)} tools",
    )  # fmt: skip
    return ToolIndex.from_config(documents, vectors, config)


def plan_finder(
    data: Dataset,
    index: ToolIndex,
    encoder: Encoder,
    retriever: RetrieverConfig,
    weights: GraphWeights | None,
    mode: GraphMode,
    keep: float,
) -> CandidateFinder:
    """The candidate finder as the proxy's planner builds it (proxy/catalog/):
    with ``retriever.clauses`` every search also reads a text's clauses, embedded through
    the same in-process memory; every policy, the retrieval baseline too, searches so."""
    from proxy.plan.candidates import CandidateFinder
    from retriever.recent import remembering

    clauses = remembering(encoder) if retriever.clauses else None
    return CandidateFinder(data.store, index, weights, mode=mode, keep=keep, clauses=clauses)
