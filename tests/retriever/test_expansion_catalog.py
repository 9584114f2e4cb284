"""The catalog's question rows (``retriever.expand_documents``): embedded at sync beside
the tools, only for tools whose fields changed, read into the index and searched as
extra rows, and carried by the index snapshot."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from qdrant_client import QdrantClient

from retriever.catalog import build_index, load_index, questions_of
from retriever.config import RetrieverConfig
from retriever.documents import tool_fields
from retriever.embedder import Encoder
from retriever.expansion import questions
from retriever.index import ToolIndex
from retriever.owned_client import OwnedClient
from retriever.qdrant_store import QdrantCatalog
from retriever.snapshot import (
    load_snapshot,
    read_snapshot,
    save_snapshot,
    snapshot_key,
    whole_index,
)
from tests.retriever.catalog import catalog_tools
from tests.retriever.test_index import CountingEncoder

EXPANDED = RetrieverConfig(expand_documents=True)


@pytest.fixture
def qdrant(tmp_path: Path) -> Iterator[OwnedClient]:
    client = OwnedClient(QdrantClient(path=str(tmp_path / "qdrant")))
    yield client
    client.close()


def _written(tools: list) -> list[str]:  # type: ignore[type-arg]
    return [q for tool in tools for q in questions(tool_fields(tool))]


def _expanded_index(qdrant: OwnedClient, encoder: Encoder) -> ToolIndex:
    catalog = QdrantCatalog(qdrant, "tools-test", encoder.dim)
    build_index(catalog_tools(), encoder, catalog, EXPANDED, progress=False)
    return load_index(catalog, EXPANDED)


def test_question_rows_are_built_and_a_tool_scores_its_best_row(
    qdrant: OwnedClient, encoder: Encoder
) -> None:
    tools = catalog_tools()
    index = _expanded_index(qdrant, encoder)
    extra = index.extra
    assert extra is not None
    assert len(extra.owners) == len(_written(tools)) >= 3 * len(tools)
    # a tool's own question, asked: its question row (cosine 1), not its document, scores it
    tool = tools[6]
    query = questions(tool_fields(tool))[1]
    vector = encoder.encode([query])[0]
    hits = index.search(vector, query, 3, method="dense")
    assert hits[0].id == tool.id
    assert hits[0].score == pytest.approx(1.0, abs=1e-3)
    row = next(i for i, doc in enumerate(index.documents) if doc.id == tool.id)
    assert float(index.dense.matrix[row] @ vector) < 0.95
    assert index.similarity_of(vector, row) == pytest.approx(1.0, abs=1e-3)  # as plans read it
    fused = index.search(vector, query, 3)
    assert fused[0].id == tool.id
    plain = load_index(QdrantCatalog(qdrant, "tools-test", encoder.dim), RetrieverConfig())
    assert plain.extra is None


def test_a_second_import_embeds_nothing_and_an_edit_only_its_tool(
    qdrant: OwnedClient, encoder: Encoder
) -> None:
    counting = CountingEncoder(encoder)
    catalog = QdrantCatalog(qdrant, "tools-test", encoder.dim)
    tools = catalog_tools()
    first = build_index(tools, counting, catalog, EXPANDED, progress=False)
    assert first.questions == len(tools)
    assert sorted(counting.texts) == sorted([d.text for d in _docs(tools)] + _written(tools))

    counting.texts.clear()
    again = build_index(tools, counting, catalog, EXPANDED, progress=False)
    assert (again.questions, again.unchanged, again.changed) == (0, len(tools), False)
    assert counting.texts == []

    edited = tools[1].model_copy(update={"description": "Returns pollen counts for a city."})
    report = build_index(
        [tools[0], edited, *tools[2:9]], counting, catalog, EXPANDED, progress=False
    )
    assert report.questions == 2  # the edited tool's questions written again, the last one's gone
    assert sorted(counting.texts) == sorted([_docs([edited])[0].text, *_written([edited])])
    stored = questions_of(catalog).load()
    assert set(stored) == {tool.id for tool in [tools[0], edited, *tools[2:9]]}
    assert stored[edited.id][0] == list(questions(tool_fields(edited)))
    assert "I want to get pollen counts for a city" in stored[edited.id][0]


def test_expansion_off_builds_no_question_rows(qdrant: OwnedClient, encoder: Encoder) -> None:
    catalog = QdrantCatalog(qdrant, "tools-test", encoder.dim)
    report = build_index(catalog_tools(), encoder, catalog, RetrieverConfig(), progress=False)
    assert report.questions == 0
    assert questions_of(catalog).load() == {}
    assert load_index(catalog, EXPANDED).extra is None


def test_the_snapshot_keeps_the_question_rows(
    tmp_path: Path, qdrant: OwnedClient, encoder: Encoder
) -> None:
    index = _expanded_index(qdrant, encoder)
    assert index.extra is not None
    path = tmp_path / "snapshot.npz"
    key = snapshot_key("v1", EXPANDED)
    assert key != snapshot_key("v1", RetrieverConfig())  # a snapshot without them is not whole
    save_snapshot(path, index, key=key)
    snapshot = read_snapshot(path)
    assert snapshot is not None
    assert snapshot.extra is not None
    np.testing.assert_array_equal(snapshot.extra.vectors, index.extra.vectors)
    np.testing.assert_array_equal(snapshot.extra.owners, index.extra.owners)
    queries = ["will it rain in Lisbon", "how much is a dollar in euros", "text my friend"]
    served = whole_index(snapshot, EXPANDED)
    for query in queries:
        vector = encoder.encode([query])[0]
        assert served.search(vector, query, 5) == index.search(vector, query, 5)
    assert whole_index(snapshot, RetrieverConfig()).extra is None

    # the rows a changed store still holds: each keeps its own questions
    kept = index.documents[2:][::-1]
    partial = load_snapshot(snapshot, kept, EXPANDED)
    assert partial is not None
    assert partial.extra is not None
    reference = ToolIndex.from_config(
        kept,
        np.stack([index.dense.matrix[index.documents.index(doc)] for doc in kept]),
        EXPANDED,
        extra=_extra_of_rows(index, kept),
    )
    for query in queries:
        vector = encoder.encode([query])[0]
        assert partial.search(vector, query, 5) == reference.search(vector, query, 5)


def _docs(tools: list) -> list:  # type: ignore[type-arg]
    from retriever.documents import catalog_documents

    return catalog_documents(tools, EXPANDED)


def _extra_of_rows(index: ToolIndex, kept: list) -> object:  # type: ignore[type-arg]
    from retriever.index import ExtraRows

    assert index.extra is not None
    vectors, owners = [], []
    for new, doc in enumerate(kept):
        old = index.documents.index(doc)
        rows = np.flatnonzero(index.extra.owners == old)
        vectors.append(index.extra.vectors[rows])
        owners += [new] * len(rows)
    return ExtraRows(np.concatenate(vectors), np.asarray(owners, dtype=np.intp))
