"""A request that asks for several things: its clauses, and a search that reads them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from retriever.batching import BatchingEmbedder
from retriever.cache import LRUCache
from retriever.clauses import MAX_CLAUSES, query_rows, split_clauses
from retriever.config import RetrieverConfig
from retriever.documents import ToolDocument
from retriever.encoder import Encoder
from retriever.index import ToolIndex
from retriever.select import SelectOptions, ToolSelector
from tests.retriever.client_tools import client_tools


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


def test_a_thousand_sentences_give_the_first_clauses_only() -> None:
    text = " ".join(f"Convert {i} dollars to euros." for i in range(1000))
    clauses = split_clauses(text)
    assert len(clauses) == MAX_CLAUSES == 16
    assert clauses[0] == "Convert 0 dollars to euros."
    assert clauses[-1] == "Convert 15 dollars to euros."


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


#: The whole text lands on the weather: no translation tool is among the five of the
#: client's 300 that select mode keeps for it, while its second clause asks for one.
WEATHER_THEN_TRANSLATION = (
    "What's the weather forecast in Lisbon today, and also translate hello into Portuguese"
)


def _selector(encoder: Encoder, clauses: bool) -> ToolSelector:
    embedder = BatchingEmbedder(encoder, LRUCache(10_000), window_ms=0)
    return ToolSelector(embedder, RetrieverConfig(clauses=clauses))


def _translations(names: list[str]) -> list[str]:
    return [name for name in names if name.endswith("_translation")]


def _user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


async def test_select_mode_keeps_the_tool_a_later_clause_asks_for(encoder: Encoder) -> None:
    options = SelectOptions(top_k=5, threshold=0.2)
    messages = _user(WEATHER_THEN_TRANSLATION)
    split = await _selector(encoder, clauses=True).select(client_tools(), messages, options)
    assert split.kept[0] == "get_weather_forecast"
    assert _translations(split.kept)
    whole = await _selector(encoder, clauses=False).select(client_tools(), messages, options)
    assert whole.kept[0] == "get_weather_forecast"
    assert not _translations(whole.kept)  # retriever.clauses off: the old ranking


@pytest.mark.parametrize(
    ("text", "clauses", "embedded"),
    [
        ("Will it rain in Paris tomorrow?", True, 1),
        (WEATHER_THEN_TRANSLATION, True, 3),
        (
            "Find a hotel in Rome, and also convert 200 dollars to euros. Then text my wife.",
            True,
            4,
        ),
        (WEATHER_THEN_TRANSLATION, False, 1),
    ],
)
async def test_select_mode_embeds_one_text_for_one_clause_and_one_more_per_clause(
    encoder: Encoder, text: str, clauses: bool, embedded: int
) -> None:
    selector = _selector(encoder, clauses)
    tools = client_tools()[:20]
    await selector.select(tools, _user("warm the cache"), SelectOptions(top_k=5, threshold=0.2))
    before = encoder.counts.texts
    await selector.select(tools, _user(text), SelectOptions(top_k=5, threshold=0.2))
    assert encoder.counts.texts - before == embedded
