"""The planner's searches read a request's clauses (``retriever.clauses``): a root
sub-task's list, the whole request's, and nothing more embedded for one clause."""

from __future__ import annotations

from pathlib import Path

import pytest

from graph_store.embedded import InProcessStore
from graph_store.ingest.openai_spec import parse_openai
from proxy.config import PlannerSettings
from proxy.plan.candidates import CandidateFinder
from proxy.plan.planner import RequestPlanner
from retriever.bulk import embed_documents
from retriever.catalog import catalog_documents
from retriever.config import RetrieverConfig
from retriever.embedder import Encoder
from retriever.index import ToolIndex
from retriever.recent import RecentVectors
from tests.retriever.client_tools import client_tools

#: The whole text lands on the weather: retrieval's first ten of the 300 client tools
#: hold no translation tool, while the second clause asks for one.
WEATHER_THEN_TRANSLATION = (
    "What's the weather forecast in Lisbon today, and also translate hello into Portuguese"
)


@pytest.fixture(scope="module")
def catalog(encoder: Encoder) -> tuple[InProcessStore, ToolIndex]:
    """Select mode's 300 client tools as a catalog, indexed as the proxy indexes one."""
    parsed = parse_openai(Path("seeded.json"), {"tools": [t["function"] for t in client_tools()]})
    store = InProcessStore()
    store.upsert_tools(parsed.tools)
    config = RetrieverConfig()
    documents = catalog_documents(parsed.tools, config)
    vectors = embed_documents(encoder, [d.text for d in documents], progress=False)
    index = ToolIndex(documents, vectors, rrf_k=config.rrf_k, dense_weight=config.dense_weight)
    return store, index


def translations(names: list[str]) -> list[str]:
    return [name for name in names if name.endswith("_translation")]


@pytest.mark.parametrize("mode", ["strict", "blend", "rerank"])
def test_a_root_sub_task_gets_the_tool_its_second_clause_asks_for(
    catalog: tuple[InProcessStore, ToolIndex], encoder: Encoder, mode: str
) -> None:
    store, index = catalog
    vector = encoder.encode([WEATHER_THEN_TRANSLATION])[0]
    split = CandidateFinder(store, index, mode=mode, clauses=encoder)  # type: ignore[arg-type]
    found = [c.tool for c in split.find(WEATHER_THEN_TRANSLATION, vector, 10)]
    assert found[0] == "get_weather_forecast"
    assert translations(found)
    whole = CandidateFinder(store, index, mode=mode)  # type: ignore[arg-type]
    alone = [c.tool for c in whole.find(WEATHER_THEN_TRANSLATION, vector, 10)]
    assert alone[0] == "get_weather_forecast"
    assert not translations(alone)  # without clauses: the old list


def test_a_candidate_scores_its_best_row_read_row_by_row(
    catalog: tuple[InProcessStore, ToolIndex], encoder: Encoder
) -> None:
    store, index = catalog
    finder = CandidateFinder(store, index, clauses=encoder)
    vector = encoder.encode([WEATHER_THEN_TRANSLATION])[0]
    rows = finder.query(WEATHER_THEN_TRANSLATION, vector)
    assert rows.shape == (3, encoder.dim)
    before = index.dense.full_products
    found = finder.retrieve(WEATHER_THEN_TRANSLATION, vector, 10)
    assert index.dense.full_products == before
    best = (index.dense.matrix @ rows.T).max(axis=1)
    position = {doc.id: i for i, doc in enumerate(index.documents)}
    for candidate in found:
        assert candidate.similarity == pytest.approx(float(best[position[candidate.tool_id]]))


@pytest.mark.parametrize(
    ("text", "clauses", "embedded"),
    [
        ("Will it rain in Paris tomorrow?", True, 0),
        (WEATHER_THEN_TRANSLATION, True, 2),
        (WEATHER_THEN_TRANSLATION, False, 0),
    ],
)
def test_a_search_embeds_nothing_more_for_one_clause_and_each_clause_once(
    catalog: tuple[InProcessStore, ToolIndex],
    encoder: Encoder,
    text: str,
    clauses: bool,
    embedded: int,
) -> None:
    """The vector of the whole text is the caller's; the clauses go through the memory of
    recent short texts, so the second search of the same text embeds nothing."""
    store, index = catalog
    remembered = RecentVectors(encoder)
    finder = CandidateFinder(store, index, clauses=remembered if clauses else None)
    vector = encoder.encode([text])[0]
    before = encoder.counts.texts
    finder.retrieve(text, vector, 10)
    finder.find(text, vector, 5)  # another depth: searched again, through the memory
    assert encoder.counts.texts - before == embedded


@pytest.mark.parametrize("clauses", [True, False])
async def test_the_whole_request_is_searched_by_its_clauses_when_the_planner_has_no_model(
    catalog: tuple[InProcessStore, ToolIndex], encoder: Encoder, clauses: bool
) -> None:
    store, index = catalog
    finder = CandidateFinder(store, index, mode="rerank", clauses=encoder if clauses else None)
    planner = RequestPlanner(finder, encoder, PlannerSettings(policy="graph", top_k=10))
    plan = await planner.plan(WEATHER_THEN_TRANSLATION, None)
    (decision,) = [d for d in plan.decisions if d.candidates]
    offered = [c.tool for c in decision.candidates]
    assert bool(translations(offered)) is clauses
    assert plan.choices["s1"] == "get_weather_forecast"
