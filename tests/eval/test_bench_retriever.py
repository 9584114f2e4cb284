"""The retriever benchmark's ``--fill-missing``: cached vectors are used, never replaced."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from eval.bench_retriever import document_vectors
from retriever.bulk import embed_documents
from retriever.config import RetrieverConfig
from retriever.documents import ToolDocument
from retriever.embedder import load_encoder


def _documents(n: int) -> list[ToolDocument]:
    return [
        ToolDocument(f"t{i}", f"tool_{i}", "c", "g", f"tool_{i}: does thing number {i}", "")
        for i in range(n)
    ]


def test_fill_missing_reads_the_vectors_the_default_encoder_cached(tmp_path: Path) -> None:
    encoder = load_encoder(RetrieverConfig(device="cpu"))  # the default: behind the adapter
    documents = _documents(3)
    embedded = embed_documents(
        encoder, [d.text for d in documents[:2]], cache_dir=tmp_path, progress=False
    )

    vectors, filled = document_vectors(encoder, documents, tmp_path, fill=True)

    assert filled == 1  # only the one never embedded is a random vector
    np.testing.assert_allclose(vectors[:2], embedded, atol=1e-6)
    assert abs(float(np.linalg.norm(vectors[2])) - 1) < 1e-5
