"""A request that asks for several things: its clauses, and a search that reads them."""

from __future__ import annotations

import numpy as np

from retriever.clauses import query_rows, split_clauses
from retriever.documents import ToolDocument
from retriever.encoder import Encoder
from retriever.index import ToolIndex


def test_a_request_for_two_things_is_cut_at_its_connective_and_sentence_ends() -> None:
    text = (
        "Find me a hotel in Rome, and also convert 200 dollars to euros. What is the weather there?"
    )
    assert split_clauses(text) == [
        "Find me a hotel in Rome",
        "convert 200 dollars to euros.",
        "What is the weather there?",
    ]


def test_one_request_is_not_cut() -> None:
    assert split_clauses("Get the weather in Paris and London") == []  # a bare "and" joins nouns
    assert split_clauses("Thanks, that helps a lot!") == []
    assert split_clauses("Book it. Thanks.") == []  # "Thanks." is no request of its own


def _doc(i: int) -> ToolDocument:
    return ToolDocument(str(i), f"tool_{i}", "", "", f"tool {i}", str(i))


def test_a_tool_scores_its_best_row_so_a_clause_brings_its_own_tool() -> None:
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((50, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = ToolIndex([_doc(i) for i in range(50)], vectors, lexical=False)
    whole, clause = vectors[3], vectors[41]
    alone = [hit.name for hit in index.search(whole, "", 5, method="dense")]
    assert "tool_41" not in alone
    both = index.search(np.vstack([whole, clause]), "", 5, method="dense")
    assert [hit.name for hit in both][:2] in (["tool_3", "tool_41"], ["tool_41", "tool_3"])
    # Each tool's score is its best row's cosine.
    expected = np.maximum(vectors @ whole, vectors @ clause)
    for hit in both:
        assert abs(hit.score - float(expected[int(hit.id)])) < 1e-5


def test_query_rows_hold_the_whole_text_first(encoder: Encoder) -> None:
    text = "Find me a hotel in Rome, and also convert 200 dollars to euros"
    rows = query_rows(encoder, text)
    assert rows.shape == (3, encoder.dim)
    assert np.allclose(rows[0], encoder.encode([text])[0], atol=1e-5)
    assert query_rows(encoder, "weather in Paris").shape == (1, encoder.dim)
