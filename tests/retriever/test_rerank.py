"""The late-interaction reranker and documents expanded with their questions.

Rankings run under the reranker's int8 and fp32 graphs (``query_precision``) and assert
a margin that both keep; the index tests with hand-made vectors need no model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retriever.config import RetrieverConfig
from retriever.delta import AdapterError
from retriever.documents import Param, ToolFields, make_document
from retriever.embedder import Encoder, bundled_model_path
from retriever.expansion import questions
from retriever.index import ExtraRows, ToolIndex
from retriever.rerank import load_reranker
from retriever.rerank.reranker import Reranker, maxsim
from retriever.rerank.weights import load_weights
from tests.conftest import ONNX_DIR

TOOLS = [
    ToolFields(
        "weather",
        "get_weather_forecast",
        "Daily weather forecast for a city.",
        params=(Param("city", "the city"), Param("date", "the day")),
    ),
    ToolFields(
        "currency",
        "convert_currency",
        "Convert an amount between two currencies.",
        params=(Param("amount"), Param("from_currency"), Param("to_currency")),
    ),
    ToolFields(
        "translate",
        "translate_text",
        "Translate text into another language.",
        params=(Param("text"), Param("target_language")),
    ),
    ToolFields(
        "email",
        "send_email",
        "Send an email message to a recipient.",
        params=(Param("to"), Param("subject"), Param("body")),
    ),
    ToolFields(
        "flights",
        "search_flights",
        "Find flights between two airports on a date.",
        params=(Param("origin"), Param("destination"), Param("date")),
    ),
]
TEXTS = [make_document(f).text for f in TOOLS]


@pytest.fixture(scope="module")
def reranker(query_precision: str) -> Reranker:
    ONNX_DIR.mkdir(parents=True, exist_ok=True)
    return Reranker(
        bundled_model_path(),
        load_weights(),
        ONNX_DIR,
        first_stage_weight=0.0,
        precision=query_precision,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("query", "wanted"),
    [
        ("Will it rain in Lisbon tomorrow?", "weather"),
        ("How many yen is 250 euros?", "currency"),
        ("Translate 'good morning' into Portuguese", "translate"),
        ("Which flights go from Boston to Denver on Friday?", "flights"),
    ],
)
def test_reranker_puts_the_tool_that_answers_first_by_a_margin(
    reranker: Reranker, query: str, wanted: str
) -> None:
    scores = reranker.scores(query, TEXTS)
    ranked = sorted(range(len(TOOLS)), key=lambda i: -scores[i])
    assert TOOLS[ranked[0]].id == wanted, [
        (TOOLS[i].id, round(float(scores[i]), 3)) for i in ranked
    ]
    assert scores[ranked[0]] - scores[ranked[1]] > 0.01


def test_tool_tokens_are_kept_by_text_and_computed_once(reranker: Reranker) -> None:
    first = reranker.tool_tokens(TEXTS[:2])
    again = reranker.tool_tokens(list(reversed(TEXTS[:2])))
    assert again[0] is first[1]
    assert again[1] is first[0]
    assert all(t.shape[1] == 64 and len(t) > 3 for t in first)


def test_first_stage_weight_moves_a_near_tie_and_not_a_clear_winner(reranker: Reranker) -> None:
    query = "Will it rain in Lisbon tomorrow?"
    plain = reranker.scores(query, TEXTS)
    weighted = Reranker.combined(reranker, query, TEXTS, [0.0] * len(TEXTS))
    assert np.allclose(plain, weighted, atol=1e-6)
    reranker.first_stage_weight = 1.0
    try:
        boost = [0.0, 0.0, 0.0, 0.0, 1.0]  # the first stage sure of the flights tool
        order = reranker.order(query, TEXTS, boost)
    finally:
        reranker.first_stage_weight = 0.0
    assert TOOLS[order[0]].id == "flights"


def test_a_reranker_keeps_numpy_s_blas_to_its_threads(query_precision: str) -> None:
    from threadpoolctl import threadpool_info, threadpool_limits

    def blas_threads() -> set[int]:
        return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}

    before = blas_threads()
    try:
        threadpool_limits(limits=2, user_api="blas")
        Reranker(
            bundled_model_path(),
            load_weights(),
            ONNX_DIR,
            first_stage_weight=0.0,
            precision=query_precision,  # type: ignore[arg-type]
        )
        assert blas_threads() == {1}
    finally:
        threadpool_limits(limits=max(before), user_api="blas")


def test_maxsim_is_the_mean_over_query_tokens_of_the_best_tool_token() -> None:
    rng = np.random.default_rng(3)
    query = rng.normal(size=(4, 8)).astype(np.float32)
    tools = [rng.normal(size=(n, 8)).astype(np.float32) for n in (1, 5, 3)]
    expected = [float((query @ t.T).max(axis=1).mean()) for t in tools]
    assert np.allclose(maxsim(query, tools), expected, atol=1e-5)
    assert maxsim(query, []).shape == (0,)


def test_a_missing_or_foreign_weights_file_is_an_adapter_error(tmp_path: Path) -> None:
    with pytest.raises(AdapterError, match="cannot read"):
        load_weights(tmp_path / "absent.npz")
    foreign = tmp_path / "foreign.npz"
    np.savez(foreign, projection=np.zeros((3, 384), dtype=np.float32))
    with pytest.raises(AdapterError, match="not a reranker"):
        load_weights(foreign)


def test_the_setting_is_off_by_default_and_gives_the_index_a_reranker() -> None:
    assert load_reranker(RetrieverConfig()) is None
    documents = [make_document(f) for f in TOOLS]
    vectors = np.eye(len(TOOLS), 8, dtype=np.float32)
    index = ToolIndex.from_config(documents, vectors, RetrieverConfig())
    assert index.reranker is None
    config = RetrieverConfig(rerank=True, onnx_dir=ONNX_DIR, rerank_first_stage_weight=0.0)
    reranked = ToolIndex.from_config(documents, vectors, config)
    assert reranked.reranker is load_reranker(config)
    # The first stage (the query vector is the email tool's) says email; the reranker reads
    # the words and says weather; rerank=False keeps the first stage.
    query = "Will it rain in Lisbon tomorrow?"
    first = reranked.search(vectors[3], query, 3, rerank=False)
    assert first[0].id == "email"
    assert reranked.search(vectors[3], query, 3)[0].id == "weather"
    assert [h.id for h in index.search(vectors[3], query, 3)] == [h.id for h in first]


def test_questions_are_written_from_name_description_and_parameters() -> None:
    written = questions(TOOLS[0])
    assert written == questions(TOOLS[0])  # deterministic (and kept by the fields' digest)
    assert 2 <= len(written) <= 4
    assert "Can you get weather forecast for me?" in written
    assert any("daily weather forecast for a city" in q.lower() for q in written)
    assert any("city and date" in q for q in written)
    verbs = questions(ToolFields("x", "convert_currency", "Converts an amount of money."))
    assert "I want to convert an amount of money" in verbs


def test_a_tool_found_by_its_question_row_scores_its_best_row() -> None:
    documents = [make_document(f) for f in TOOLS[:3]]
    vectors = np.eye(3, 4, dtype=np.float32)
    question = np.asarray([[0, 0, 0.6, 0.8]], dtype=np.float32)
    extra = ExtraRows(question, np.asarray([1], dtype=np.intp))
    index = ToolIndex(documents, vectors, extra=extra, lexical=False)
    query = np.asarray([0, 0, 0, 1], dtype=np.float32)
    hits = index.search(query, "", 2, method="dense")
    assert hits[0].id == "currency"
    assert hits[0].score == pytest.approx(0.8)
    plain = ToolIndex(documents, vectors, lexical=False).search(query, "", 2, method="dense")
    assert plain[0].score == pytest.approx(0.0)


def test_expanded_rows_bring_up_the_tool_whose_question_the_user_asks(encoder: Encoder) -> None:
    terse = ToolFields("t1", "wx_q", "Internal handler.", params=(Param("loc"),))
    others = [
        ToolFields(f"o{i}", f"tool_{i}", d)
        for i, d in enumerate(
            ["List the files in a folder.", "Send a text message.", "Play a song."]
        )
    ]
    fields = [terse, *others]
    documents = [make_document(f) for f in fields]
    vectors = encoder.encode([d.text for d in documents])
    asked = ["Can you tell me the weather in Lisbon tomorrow?"]
    extra = ExtraRows(encoder.encode(asked), np.asarray([0], dtype=np.intp))
    query = encoder.encode(["what will the weather be like in Lisbon"])[0]
    expanded = ToolIndex(documents, vectors, extra=extra, lexical=False)
    hits = expanded.search(query, "", 2, method="dense")
    assert hits[0].id == "t1"
    assert hits[0].score - hits[1].score > 0.1
    assert (
        ToolIndex(documents, vectors, lexical=False).search(query, "", 1, method="dense")[0].score
        < hits[0].score - 0.1
    )
