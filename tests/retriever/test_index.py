"""Documents, BM25, fusion, the exact matrix and Qdrant (local mode) kept in step."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from pydantic import JsonValue
from qdrant_client import QdrantClient

from retriever.bulk import embed_documents
from retriever.catalog import catalog_documents, load_index
from retriever.config import RetrieverConfig
from retriever.documents import (
    Param,
    ToolFields,
    corpus_fields,
    document_text,
    function_fields,
    make_document,
    name_words,
    tool_fields,
)
from retriever.embedder import Encoder, Vectors
from retriever.fusion import reciprocal_rank_fusion, top_k
from retriever.index import ToolIndex
from retriever.lexical import BM25Index, tokenize
from retriever.owned_client import OwnedClient
from retriever.qdrant_store import QdrantCatalog
from tests.retriever.catalog import catalog_tools, make_tool


def test_enriched_documents_carry_names_groups_parameters_and_enums() -> None:
    fields = ToolFields(
        id="1",
        name="getWeather_forecast",
        description="Forecast by city.",
        category="weather",
        group="openweather",
        group_description="Weather data for any location.",
        params=(Param("units", "Unit system", ("metric", "imperial")),),
    )
    text = document_text(fields, "enriched")
    assert text.splitlines()[0] == "get Weather forecast (openweather, weather)"
    assert "Weather data for any location." in text
    assert "units (Unit system): metric, imperial" in text
    assert document_text(fields, "name_description") == "getWeather_forecast: Forecast by city."


def test_a_document_digest_follows_its_text() -> None:
    tool = catalog_tools()[0]
    same = make_document(tool_fields(tool))
    changed = make_document(tool_fields(tool.model_copy(update={"description": "Other."})))
    assert same.digest == make_document(tool_fields(tool)).digest
    assert same.digest != changed.digest


def test_openai_functions_become_documents() -> None:
    fields = function_fields(
        {
            "name": "set_mode",
            "description": "Set the mode.",
            "parameters": {"type": "object", "properties": {"mode": {"enum": ["a", "b"]}}},
        },
        id="t0",
    )
    assert fields.params == (Param("mode", "", ("a", "b")),)


def test_identifiers_split_into_words() -> None:
    assert name_words("vinDecoder_for-carAPI") == "vin Decoder for car API"
    # "for" and "the" are stop words.
    assert tokenize("vinDecoder_forCarAPI the VIN") == ["vin", "decoder", "car", "api", "vin"]


def test_bm25_prefers_the_document_with_the_rare_word() -> None:
    index = BM25Index(["weather in paris", "weather and vin numbers", "stock prices"])
    scores = index.scores("decode a vin")
    assert int(np.argmax(scores)) == 1
    assert scores[2] == 0
    assert not index.scores("zzzz unknown words").any()


def test_top_k_orders_by_score_then_index() -> None:
    scores = np.asarray([0.1, 0.9, 0.5, 0.9, 0.0], dtype=np.float32)
    assert top_k(scores, 3).tolist() == [1, 3, 2]
    assert top_k(scores, 10).tolist() == [1, 3, 2, 0, 4]


def test_reciprocal_rank_fusion_rewards_agreement() -> None:
    dense = np.asarray([0, 1, 2])
    lexical = np.asarray([2, 3, 0])
    fused = [index for index, _ in reciprocal_rank_fusion([dense, lexical], 4, constant=60)]
    # 0: 1/61+1/63, 2: 1/63+1/61 (tie, lower index first), then 1 (1/62) before 3 (1/62)
    assert fused == [0, 2, 1, 3]


@pytest.fixture(scope="module")
def index_and_vectors(encoder: Encoder) -> tuple[ToolIndex, Vectors]:
    documents = catalog_documents(catalog_tools(), RetrieverConfig())
    vectors = embed_documents(encoder, [d.text for d in documents], progress=False)
    return ToolIndex(documents, vectors), vectors


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("will it rain in Lisbon tomorrow?", "get_weather_forecast"),
        ("how many dollars is 50 euros", "convert_currency"),
        ("text my friend that I'm late", "send_sms"),
        ("what car is WVWZZZ1JZXW000001", "vin_decoder"),
    ],
)
@pytest.mark.parametrize("method", ["dense", "hybrid"])
def test_search_finds_the_tool(
    index_and_vectors: tuple[ToolIndex, Vectors],
    encoder: Encoder,
    query: str,
    expected: str,
    method: str,
) -> None:
    index, _ = index_and_vectors
    hits = index.search(encoder.encode([query])[0], query, 3, method=method)  # type: ignore[arg-type]
    assert hits[0].name == expected


def test_filters_keep_one_category_or_group(
    index_and_vectors: tuple[ToolIndex, Vectors], encoder: Encoder
) -> None:
    index, _ = index_and_vectors
    query = "weather forecast"
    vector = encoder.encode([query])[0]
    hits = index.search(vector, query, 10, category="finance")
    assert {hit.category for hit in hits} == {"finance"}
    assert len(hits) == 2
    assert index.search(vector, query, 10, category="Finance") == hits  # any case
    assert [h.name for h in index.search(vector, query, 10, group="twilio", method="bm25")] == []
    assert [h.name for h in index.search(vector, query, 10, group="twilio")] == ["send_sms"]


class CountingEncoder:
    """The real encoder, counting the texts it is asked to embed."""

    def __init__(self, encoder: Encoder) -> None:
        self.inner = encoder
        self.texts: list[str] = []

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def encode(self, texts: list[str]) -> Vectors:
        self.texts += texts
        return self.inner.encode(texts)


@pytest.fixture
def qdrant(tmp_path: Path) -> Iterator[OwnedClient]:
    client = OwnedClient(QdrantClient(path=str(tmp_path / "qdrant")))
    yield client
    client.close()


def test_qdrant_sync_embeds_only_what_changed(qdrant: OwnedClient, encoder: Encoder) -> None:
    counting = CountingEncoder(encoder)
    catalog = QdrantCatalog(qdrant, "tools-test", encoder.dim)
    tools = catalog_tools()
    config = RetrieverConfig()

    def sync(current: list) -> object:  # type: ignore[type-arg]
        docs = catalog_documents(current, config)
        return catalog.sync(docs, lambda texts: embed_documents(counting, texts, progress=False))

    first = sync(tools)
    assert (first.added, first.updated, first.removed) == (10, 0, 0)  # type: ignore[attr-defined]
    counting.texts.clear()
    again = sync(tools)
    assert again.unchanged == 10  # type: ignore[attr-defined]
    assert counting.texts == []
    edited = tools[1].model_copy(update={"description": "Pollen counts and air quality."})
    report = sync([tools[0], edited, *tools[2:9]])  # and the VIN decoder leaves
    assert (report.added, report.updated, report.removed) == (0, 1, 1)  # type: ignore[attr-defined]
    assert len(counting.texts) == 1
    assert "Pollen" in counting.texts[0]
    assert len(catalog.stored()) == 9


def test_the_matrix_and_qdrant_agree(qdrant: OwnedClient, encoder: Encoder) -> None:
    config = RetrieverConfig()
    catalog = QdrantCatalog(qdrant, "tools-test", encoder.dim)
    catalog.sync(
        catalog_documents(catalog_tools(), config),
        lambda texts: embed_documents(encoder, texts, progress=False),
    )
    index = load_index(catalog, config)
    assert len(index) == 10
    for query, category in [("send a message", None), ("money", "finance"), ("trip", "travel")]:
        vector = encoder.encode([query])[0]
        in_process = index.search(vector, query, 3, method="dense", category=category)
        stored = catalog.search(vector, 3, category=category)
        assert [h.id for h in in_process] == [tool_id for tool_id, _ in stored]
        assert np.allclose([h.score for h in in_process], [s for _, s in stored], atol=1e-4)


def test_the_disk_cache_embeds_each_text_once(tmp_path: Path, encoder: Encoder) -> None:
    counting = CountingEncoder(encoder)
    first = embed_documents(
        counting, ["a tool", "another tool"], cache_dir=tmp_path, progress=False
    )
    again = embed_documents(
        counting, ["another tool", "a tool", "new"], cache_dir=tmp_path, progress=False
    )
    assert counting.texts == ["a tool", "another tool", "new"]
    assert np.allclose(again[:2], first[::-1])


def test_a_tool_with_no_parameters_still_gets_a_document() -> None:
    tool = make_tool("ping", "misc", "util", "", {})
    text = make_document(tool_fields(tool)).text
    assert text == "ping (util, misc)"


def test_weights_tilt_the_fusion_towards_one_ranking() -> None:
    dense, lexical = np.asarray([0, 1]), np.asarray([1, 0])
    towards_dense = reciprocal_rank_fusion([dense, lexical], 2, weights=(1.2, 0.8))
    towards_bm25 = reciprocal_rank_fusion([dense, lexical], 2, weights=(0.8, 1.2))
    assert [index for index, _ in towards_dense] == [0, 1]
    assert [index for index, _ in towards_bm25] == [1, 0]


def test_training_set_rows_become_enriched_documents() -> None:
    sgd: dict[str, JsonValue] = {
        "_id": "sgd_Banks_1__CheckBalance",
        "name": "CheckBalance",
        "description": "Check the amount of money in a user's bank account",
        "parameters": {
            "type": "object",
            "properties": {
                "account_type": {
                    "type": "string",
                    "description": "The account type",
                    "enum": ["checking", "savings"],
                }
            },
        },
        "service": "Banks_1",
        "service_description": "Manage bank accounts and transfer money",
        "domain": "Banks",
    }
    assert make_document(corpus_fields(sgd)).text == (
        "Check Balance (Banks_1, Banks)\nCheck the amount of money in a user's bank account\n"
        "Manage bank accounts and transfer money\n"
        "Parameters: account type (The account type): checking, savings"
    )
    zoo: dict[str, JsonValue] = {
        "_id": "zoo_1",
        "name": "List keys",
        "description": "List all API keys.",
        "parameters": {"page_size": "integer: Size of a page."},
        "family": "Datadog_API",
    }
    assert make_document(corpus_fields(zoo)).text == (
        "List keys (Datadog_API)\nList all API keys.\nParameters: page size (integer: Size of a page.)"
    )


def _unit(*values: float) -> Vectors:
    vector = np.asarray(values, dtype=np.float32)
    normed: Vectors = vector / np.linalg.norm(vector)
    return normed


def _fusion_case(fusion: str) -> tuple[list[str], list[float]]:
    """Three tools: ``close`` is the query's nearest (cosine 0.9) with no query word,
    ``second`` is nearly as near (0.85) with one, ``words`` barely near (0.2) with both."""
    texts = ["unrelated close match", "delta second match", "gamma delta words"]
    names = ["close", "second", "words"]
    documents = [
        make_document(ToolFields(id=n, name=n, description=t))
        for n, t in zip(names, texts, strict=True)
    ]
    vectors = np.stack(
        [
            _unit(0.9, np.sqrt(1 - 0.81), 0),
            _unit(0.85, 0, np.sqrt(1 - 0.85**2)),
            _unit(0.2, -np.sqrt(1 - 0.04), 0),
        ]
    )
    config = RetrieverConfig(fusion_method=fusion)  # type: ignore[arg-type]
    index = ToolIndex.from_config(documents, vectors, config)
    hits = index.search(_unit(1, 0, 0), "gamma delta", 3)
    return [hit.name for hit in hits], [hit.score for hit in hits]


def test_score_fusion_weighs_how_near_a_tool_is_not_only_its_rank() -> None:
    # RRF sees ranks only: "words" is third of three by meaning (cosine 0.2 against 0.9)
    # but first for BM25, and passes "close". Score fusion reads the distance.
    by_rank, _ = _fusion_case("rrf")
    by_score, scores = _fusion_case("scores")
    assert by_rank.index("words") < by_rank.index("close")
    assert by_score[-1] == "words"
    # close: 0.7 x 0.9 / 0.9 and no word; words: 0.7 x 0.2 / 0.9 + 0.3 x its BM25 / the best.
    assert scores[by_score.index("close")] == pytest.approx(0.7)
    assert scores[-1] == pytest.approx(0.7 * 0.2 / 0.9 + 0.3, abs=1e-5)


def test_score_fusion_reads_the_similarity_of_a_tool_only_bm25_found() -> None:
    # 150 tools nearer the query than the one BM25 finds: it is outside the dense top 100,
    # and its cosine (0.5) still counts, exactly, as the evaluation computes it.
    documents = [make_document(ToolFields(id=f"t{i}", name=f"filler{i}")) for i in range(150)]
    documents.append(make_document(ToolFields(id="found", name="found", description="zebra")))
    cosines = [0.9 - 0.002 * i for i in range(150)] + [0.5]
    vectors = np.stack([_unit(c, np.sqrt(1 - c * c)) for c in cosines])
    index = ToolIndex.from_config(documents, vectors, RetrieverConfig())
    hits = {hit.id: hit.score for hit in index.search(_unit(1, 0), "zebra", 200)}
    assert hits["found"] == pytest.approx(0.7 * 0.5 / 0.9 + 0.3, abs=1e-5)
    assert hits["t0"] == pytest.approx(0.7)


def test_the_index_takes_bm25_and_fusion_from_the_settings() -> None:
    texts = ["weather forecast for a city", "weather", "stock prices and weather"]
    documents = [
        make_document(ToolFields(id=str(i), name="t", description=t)) for i, t in enumerate(texts)
    ]
    config = RetrieverConfig(bm25_k1=1.5, bm25_b=0.75)
    index = ToolIndex.from_config(documents, np.eye(3, dtype=np.float32), config)
    expected = BM25Index([d.text for d in documents], k1=1.5, b=0.75).scores("weather")
    assert index.bm25 is not None
    assert index.bm25.scores("weather").tolist() == expected.tolist()
    assert (
        index.bm25.scores("weather").tolist()
        != BM25Index([d.text for d in documents]).scores("weather").tolist()
    )
    assert (
        ToolIndex.from_config(
            documents, np.eye(3, dtype=np.float32), RetrieverConfig(fusion=False)
        ).bm25
        is None
    )


def test_a_bm25_index_built_under_other_settings_is_built_again() -> None:
    # An index snapshot written before BM25's k1/b changed holds a BM25 index of the old
    # settings; serving it would rank by settings nobody chose.
    texts = ["weather forecast for a city", "weather", "stock prices and weather"]
    documents = [
        make_document(ToolFields(id=str(i), name="t", description=t)) for i, t in enumerate(texts)
    ]
    stale = BM25Index([d.text for d in documents], k1=0.9, b=0.4)
    vectors = np.eye(3, dtype=np.float32)
    index = ToolIndex.from_config(documents, vectors, RetrieverConfig(), bm25=stale)
    assert index.bm25 is not stale
    assert index.bm25 is not None
    assert (index.bm25.k1, index.bm25.b) == (1.5, 0.75)
    same = RetrieverConfig(bm25_k1=0.9, bm25_b=0.4)
    assert ToolIndex.from_config(documents, vectors, same, bm25=stale).bm25 is stale
