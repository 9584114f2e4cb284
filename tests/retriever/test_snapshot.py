"""The index snapshot carries what a restart would otherwise rebuild: the BM25 index,
the key the store was at, the gate's vectors; a restart that changed nothing reads
them instead of tokenizing the catalog again."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np

from retriever.catalog import catalog_documents
from retriever.config import RetrieverConfig
from retriever.embedder import Vectors
from retriever.index import ToolIndex
from retriever.lexical import BM25Index
from retriever.snapshot import (
    GateVectors,
    load_snapshot,
    read_snapshot,
    save_snapshot,
    snapshot_key,
    whole_index,
)
from tests.retriever.catalog import catalog_tools

QUERIES = ("weather forecast in Paris", "send an email", "convert currency", "zzz unknown")


def _unit_rows(count: int, seed: int = 7) -> Vectors:
    rows = np.random.default_rng(seed).normal(size=(count, 16)).astype(np.float32)
    normalised: Vectors = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return normalised


def _index(config: RetrieverConfig) -> ToolIndex:
    documents = catalog_documents(catalog_tools(), config)
    return ToolIndex.from_config(documents, _unit_rows(len(documents)), config)


def test_a_bm25_index_from_its_state_scores_as_the_one_built() -> None:
    texts = [doc.text for doc in catalog_documents(catalog_tools(), RetrieverConfig())]
    built = BM25Index(texts)
    restored = BM25Index.from_state(built.state())
    assert len(restored) == len(built)
    for query in QUERIES:
        np.testing.assert_array_equal(restored.scores(query), built.scores(query))
    assert len(BM25Index.from_state(BM25Index([]).state())) == 0


def test_a_snapshot_keeps_its_key_its_bm25_index_and_the_gate_vectors(tmp_path: Path) -> None:
    config = RetrieverConfig()
    index = _index(config)
    assert index.bm25 is not None
    gate = GateVectors(
        "gate-encoder",
        ["a_tool: finds things", "another_tool"],
        _unit_rows(2, seed=3),
        [frozenset({"tool", "finds", "things"}), frozenset({"another", "tool"})],
        [frozenset({"tool"}), frozenset({"another", "tool"})],
    )
    path = tmp_path / "snapshot.npz"
    key = snapshot_key("store-version-1", config)
    save_snapshot(path, index, key=key, gate=gate)

    snapshot = read_snapshot(path)
    assert snapshot is not None
    assert snapshot.key == key != snapshot_key("store-version-2", config)
    assert snapshot.key != snapshot_key(
        "store-version-1", RetrieverConfig(document="name_description")
    )
    assert snapshot.documents == index.documents
    assert snapshot.gate is not None
    assert snapshot.gate.encoder == "gate-encoder"
    assert snapshot.gate.documents == gate.documents
    np.testing.assert_array_equal(snapshot.gate.vectors, gate.vectors)
    assert snapshot.gate.words == gate.words
    assert snapshot.gate.names == gate.names

    served = whole_index(snapshot, config)
    assert served.bm25 is not None
    for query in QUERIES:
        np.testing.assert_array_equal(served.bm25.scores(query), index.bm25.scores(query))
        vector = _unit_rows(1, seed=len(query))[0]
        assert served.search(vector, query, 5) == index.search(vector, query, 5)


def test_a_snapshot_of_other_rows_builds_bm25_over_the_rows_kept(tmp_path: Path) -> None:
    """The BM25 index is of every row: with one tool gone its statistics are not the kept
    rows', so it is built again over them."""
    config = RetrieverConfig()
    index = _index(config)
    path = tmp_path / "snapshot.npz"
    save_snapshot(path, index)
    snapshot = read_snapshot(path)
    assert snapshot is not None
    assert snapshot.key == ""

    kept = index.documents[1:]
    partial = load_snapshot(snapshot, kept, config)
    assert partial is not None
    assert partial.bm25 is not None
    assert len(partial) == len(partial.bm25) == len(kept)
    rebuilt = BM25Index([doc.text for doc in kept], k1=config.bm25_k1, b=config.bm25_b)
    for query in QUERIES:
        np.testing.assert_array_equal(partial.bm25.scores(query), rebuilt.scores(query))


def test_an_old_snapshot_without_bm25_still_serves(tmp_path: Path) -> None:
    """A snapshot written before BM25 was kept in it (documents and vectors only)."""
    config = RetrieverConfig()
    index = _index(config)
    path = tmp_path / "old.npz"
    documents = json.dumps([asdict(doc) for doc in index.documents])
    np.savez(
        path,
        vectors=index.dense.matrix,
        documents=np.frombuffer(documents.encode(), dtype=np.uint8),
    )
    snapshot = read_snapshot(path)
    assert snapshot is not None
    assert snapshot.key == ""
    assert not snapshot.bm25
    assert snapshot.gate is None
    served = whole_index(snapshot, config)
    assert served.bm25 is not None
    assert served.documents == index.documents
