"""The int8 candidate pass against the exact float32 search, on a fixed catalog: the
bundled model's vectors of a few hundred tool texts among seeded distractors near them."""

from __future__ import annotations

import numpy as np
import pytest

from retriever.dense import DenseMatrix
from retriever.embedder import Encoder, Vectors

QUERIES = [
    "what is the weather in Paris tomorrow",
    "convert 100 euros to dollars",
    "send an email to my manager",
    "find flights from Berlin to Rome",
    "latest basketball scores",
    "translate this sentence into German",
]


@pytest.fixture(scope="module")
def catalog(encoder: Encoder) -> Vectors:
    texts = [f"{topic} tool number {i}" for i in range(40) for topic in _TOPICS]
    real = encoder.encode(texts[:256])
    rng = np.random.default_rng(7)
    # Distractors near the real rows, so that the int8 pass has close calls to get wrong.
    near = real[rng.integers(0, len(real), 12_000)] + 0.15 * rng.standard_normal((12_000, 384))
    rows = np.concatenate([real, near.astype(np.float32)])
    normalised: Vectors = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return normalised


_TOPICS = [
    "weather forecast",
    "currency exchange",
    "email sender",
    "flight search",
    "sports scores",
    "translation",
]


def same(found: list[tuple[int, float]], expected: list[tuple[int, float]]) -> bool:
    """The same rows in the same order, with the same scores up to float rounding."""
    return [i for i, _ in found] == [i for i, _ in expected] and np.allclose(
        [s for _, s in found], [s for _, s in expected], atol=1e-6
    )


@pytest.fixture(scope="module")
def queries(encoder: Encoder) -> Vectors:
    return encoder.encode(QUERIES)


def test_the_compressed_search_finds_the_exact_top_k(catalog: Vectors, queries: Vectors) -> None:
    compressed, exact = DenseMatrix(catalog), DenseMatrix(catalog, compress=False)
    assert compressed.compressed
    assert not exact.compressed
    for query in queries:
        for k in (1, 10, 100):
            assert same(compressed.search(query, k), exact.search(query, k))


def test_the_compressed_search_honours_a_mask(catalog: Vectors, queries: Vectors) -> None:
    compressed, exact = DenseMatrix(catalog), DenseMatrix(catalog, compress=False)
    mask = np.random.default_rng(1).random(len(catalog)) < 0.02
    for query in queries:
        found = compressed.search(query, 10, mask)
        assert same(found, exact.search(query, 10, mask))
        assert all(mask[i] for i, _ in found)
    nothing = np.zeros(len(catalog), dtype=np.bool_)
    assert compressed.search(queries[0], 10, nothing) == []


def test_a_small_catalog_stays_exact(queries: Vectors) -> None:
    small = DenseMatrix(queries)
    assert not small.compressed
    assert small.search(queries[0], 1)[0][0] == 0


def best_row_top_k(catalog: Vectors, rows: Vectors, k: int) -> list[int]:
    """The ``k`` catalog rows with the highest best cosine over ``rows``, by brute force."""
    best = (catalog @ rows.T).max(axis=1)
    return [int(i) for i in np.argsort(-best, kind="stable")[:k]]


def test_several_query_rows_score_each_tool_by_its_best_row(
    catalog: Vectors, queries: Vectors
) -> None:
    rows = queries[:3]  # a text and two clauses: weather, currency, email
    for matrix in (DenseMatrix(catalog), DenseMatrix(catalog, compress=False)):
        for k in (1, 10, 100):
            found = matrix.search(rows, k)
            assert [i for i, _ in found] == best_row_top_k(catalog, rows, k)
            expected = (catalog[[i for i, _ in found]] @ rows.T).max(axis=1)
            assert np.allclose([s for _, s in found], expected, atol=1e-6)


def test_one_query_row_as_a_matrix_searches_as_the_vector_does(
    catalog: Vectors, queries: Vectors
) -> None:
    matrix = DenseMatrix(catalog)
    for query in queries:
        assert same(matrix.search(query[None, :], 10), matrix.search(query, 10))


def test_several_query_rows_honour_a_mask(catalog: Vectors, queries: Vectors) -> None:
    compressed, exact = DenseMatrix(catalog), DenseMatrix(catalog, compress=False)
    mask = np.random.default_rng(2).random(len(catalog)) < 0.02
    found = compressed.search(queries[2:5], 10, mask)
    assert same(found, exact.search(queries[2:5], 10, mask))
    assert all(mask[i] for i, _ in found)


def test_a_search_that_would_rescore_half_the_rows_is_exact(
    catalog: Vectors, queries: Vectors
) -> None:
    """Past COMPRESS_FROM, a deep search (a catalog's question rows are read 3 x 100 deep)
    of several query rows would rescore most of the matrix after the int8 pass: the exact
    product alone is cheaper, and its top k is the exact one."""
    compressed, exact = DenseMatrix(catalog), DenseMatrix(catalog, compress=False)
    assert same(compressed.search(queries[0], 10), exact.search(queries[0], 10))
    assert compressed.int8_passes == 1
    deep = 400
    assert 2 * 4 * deep * 4 >= len(catalog)
    assert same(compressed.search(queries[:4], deep), exact.search(queries[:4], deep))
    assert compressed.int8_passes == 1
