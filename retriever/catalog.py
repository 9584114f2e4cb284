"""The catalog's search: documents from graph_store's tools, vectors kept in Qdrant,
and an in-process :class:`ToolIndex` loaded from Qdrant for the hot path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from graph_store.models import Tool
from retriever.bulk import embed_documents
from retriever.config import RetrieverConfig
from retriever.documents import ToolDocument, catalog_documents, tool_fields
from retriever.embedder import Encoder, Vectors
from retriever.errors import IndexNotBuilt
from retriever.index import ToolIndex
from retriever.qdrant_store import QdrantCatalog, SyncReport, collection_name, open_client
from retriever.question_store import QdrantQuestions, extra_rows, written_questions

__all__ = ["build_index", "catalog_documents", "load_index", "open_catalog"]


def open_catalog(
    encoder: Encoder, config: RetrieverConfig, data_dir: Path, qdrant_url: str | None
) -> QdrantCatalog:
    client = open_client(data_dir, qdrant_url)
    return QdrantCatalog(client, collection_name(config.catalog, encoder.name), encoder.dim)


def build_index(
    tools: Sequence[Tool],
    encoder: Encoder,
    catalog: QdrantCatalog,
    config: RetrieverConfig,
    *,
    cache_dir: Path | None = None,
    progress: bool = True,
) -> SyncReport:
    """Bring the collection in step with ``tools``; only changed tools are embedded.
    With ``config.expand_documents``, their questions too (only those of tools whose
    fields changed)."""
    documents = catalog_documents(tools, config)

    def embed(texts: list[str]) -> Vectors:
        return embed_documents(encoder, texts, cache_dir=cache_dir, progress=progress)

    report = catalog.sync(documents, embed)
    if not config.expand_documents:
        return report
    wanted = written_questions([tool_fields(tool) for tool in tools])
    changed = questions_of(catalog).sync(wanted, embed)
    return dataclasses.replace(report, questions=changed)


def questions_of(catalog: QdrantCatalog) -> QdrantQuestions:
    """The question rows' collection beside ``catalog``'s."""
    return QdrantQuestions(catalog.client, catalog.collection, catalog.dim)


def load_index(catalog: QdrantCatalog, config: RetrieverConfig) -> ToolIndex:
    if not catalog.exists():
        raise IndexNotBuilt(
            f"the catalog has no index yet (collection {catalog.collection}): "
            "run `toolgraph index build`"
        )
    points, vectors = catalog.load()
    documents = [
        ToolDocument(p.tool_id, p.name, p.category, p.group, p.text, p.digest) for p in points
    ]
    extra = extra_rows(documents, questions_of(catalog).load()) if config.expand_documents else None
    return ToolIndex.from_config(documents, vectors, config, extra=extra)
