"""Plans checked against the knowledge-graph pack's preconditions at plan time: a step
whose tool lacks what it needs is repaired when the fix is certain and refused
otherwise, each with a note in the trace; the executor's DAG follows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graph_store.embedded import InProcessStore
from proxy.config import KnowledgeGraphPackSettings, PlannerSettings
from proxy.execute.plan import Binding
from proxy.llm import UpstreamModel
from proxy.plan.candidates import CandidateFinder
from proxy.plan.model import Plan, SubTask
from proxy.plan.planner import RequestPlanner
from proxy.plan.preconditions import enforce_preconditions
from proxy.tools.packs.knowledge_graph.catalog import (
    EDGE_ORIGIN,
    knowledge_graph_edges,
    knowledge_graph_tools,
)
from retriever.bulk import embed_documents
from retriever.catalog import catalog_documents
from retriever.config import RetrieverConfig
from retriever.embedder import Encoder
from retriever.index import ToolIndex
from testing.fake_upstream import FakeUpstream, Script

GRAPH = KnowledgeGraphPackSettings(name="geo", path=Path("demo"))


@pytest.fixture
def store(tmp_path: Path) -> InProcessStore:
    held = InProcessStore(tmp_path)
    held.upsert_tools(knowledge_graph_tools([GRAPH]))
    held.replace_edges(EDGE_ORIGIN, knowledge_graph_edges([GRAPH]))
    return held


def plan_of(*steps: tuple[str, str, tuple[str, ...]]) -> Plan:
    """Steps as (id, tool without the graph's prefix, needs)."""
    tasks = [SubTask(id=i, text=f"step {i}", needs=needs) for i, _, needs in steps]
    return Plan(tasks, {i: f"geo_{tool}" for i, tool, _ in steps}, "llm")


def test_a_plan_whose_preconditions_hold_is_left_as_it_is(store: InProcessStore) -> None:
    plan = plan_of(
        ("s1", "find_entities", ()),
        ("s2", "get_relations", ("s1",)),
        ("s3", "get_neighbors", ("s1", "s2")),
        ("s4", "get_attributes", ("s3",)),
        ("s5", "argmax", ("s3", "s4")),
    )
    before = [task.model_copy() for task in plan.subtasks]
    enforce_preconditions(plan, store)
    assert plan.notes == []
    assert plan.subtasks == before


def test_a_missing_get_relations_is_inserted_before_get_neighbors(store: InProcessStore) -> None:
    plan = plan_of(("s1", "find_entities", ()), ("s2", "get_neighbors", ("s1",)))
    enforce_preconditions(plan, store)
    assert plan.notes == [
        "precondition: s2 (geo_get_neighbors) needs relations from geo_get_relations, which "
        "no step before it called: inserted s2_relations"
    ]
    assert [task.id for task in plan.subtasks] == ["s1", "s2_relations", "s2"]
    assert plan.choices["s2_relations"] == "geo_get_relations"
    assert plan.subtasks[1].needs == ("s1",)
    assert plan.subtasks[2].needs == ("s1", "s2_relations")
    nodes = {node.id: node for node in plan.tool_plan(store).nodes}
    assert nodes["s2_relations"].inputs == (
        Binding(source="s1", path="variable", target="variable"),
    )
    assert nodes["s2"].needs == ("s1", "s2_relations")


def test_argmax_without_get_attributes_gets_one(store: InProcessStore) -> None:
    plan = plan_of(
        ("s1", "find_entities", ()),
        ("s2", "get_relations", ("s1",)),
        ("s3", "get_neighbors", ("s1", "s2")),
        ("s4", "argmax", ("s3",)),
    )
    enforce_preconditions(plan, store)
    assert plan.notes == [
        "precondition: s4 (geo_argmax) needs attributes from geo_get_attributes, which no "
        "step before it called: inserted s4_attributes"
    ]
    added = plan.subtasks[3]
    assert (added.id, added.needs) == ("s4_attributes", ("s3",))  # the attributes of s3's set


def test_a_variable_made_further_back_becomes_a_direct_need(store: InProcessStore) -> None:
    plan = plan_of(
        ("s1", "find_entities", ()),
        ("s2", "get_relations", ("s1",)),
        ("s3", "get_neighbors", ("s2",)),
    )
    enforce_preconditions(plan, store)
    assert plan.notes == [
        "precondition: s3 (geo_get_neighbors) now reads the variable of s1 "
        "(geo_find_entities) directly"
    ]
    assert plan.subtasks[2].needs == ("s2", "s1")


def test_a_chain_with_no_start_gets_find_entities_as_its_start(store: InProcessStore) -> None:
    """Several tools make a variable, but only find_entities makes one from nothing: a
    decomposed "the countries bordering Germany" that skipped finding Germany."""
    plan = plan_of(("s1", "get_neighbors", ()), ("s2", "count", ("s1",)))
    refused = enforce_preconditions(plan, store)
    assert refused == {}
    assert plan.notes == [
        "precondition: s1 (geo_get_neighbors) needs variable from geo_find_entities, which "
        "no step before it called: inserted s1_variable as the start of its chain",
        "precondition: s1 (geo_get_neighbors) needs relations from geo_get_relations, which "
        "no step before it called: inserted s1_relations",
    ]
    assert [task.id for task in plan.subtasks] == ["s1_variable", "s1_relations", "s1", "s2"]
    assert plan.subtasks[0].text == "Get the variable that this step needs: step s1"
    assert plan.choices["s1_variable"] == "geo_find_entities"
    assert plan.subtasks[2].needs == ("s1_variable", "s1_relations")


def test_without_starts_a_step_with_no_variable_before_it_is_refused_and_so_are_its_dependents(
    store: InProcessStore,
) -> None:
    plan = plan_of(
        ("s1", "get_neighbors", ()),
        ("s2", "count", ("s1",)),
        ("s3", "find_entities", ()),
    )
    refused = enforce_preconditions(plan, store, starts=False)
    assert refused == {"s1": "geo_get_neighbors", "s2": "geo_count"}
    makers = "geo_argmax, geo_argmin, geo_find_entities, geo_get_neighbors, geo_intersection"
    assert plan.notes == [
        f"precondition: refused geo_get_neighbors for s1: it needs variable from one of "
        f"{makers.replace('geo_get_neighbors, ', '')}, and no step before it calls one",
        f"precondition: refused geo_count for s2: it needs variable from one of {makers}, "
        "and no step before it calls one",
    ]
    assert plan.choices == {"s3": "geo_find_entities"}
    assert [node.tool for node in plan.tool_plan(store).nodes] == ["geo_find_entities"]
    assert "refused geo_count" in str(plan.trace()["notes"])


async def test_the_planner_repairs_the_plan_it_hands_over(
    store: InProcessStore, encoder: Encoder, upstream: FakeUpstream, model: UpstreamModel
) -> None:
    """Through :class:`RequestPlanner`: the model plans a hop without get_relations; the
    plan that comes out has it, and says so."""
    tools = store.list_tools()
    documents = catalog_documents(tools, RetrieverConfig())
    vectors = embed_documents(encoder, [d.text for d in documents], progress=False)
    finder = CandidateFinder(store, ToolIndex(documents, vectors))
    steps = [
        {"id": "s1", "text": "find the country Germany", "category": "knowledge_graph"},
        {"id": "s2", "text": "the countries bordering it", "category": "knowledge_graph",
         "needs": ["s1"]},
    ]  # fmt: skip
    upstream.enqueue(
        Script(text=json.dumps({"subtasks": steps})),
        Script(text=json.dumps({"choice": 1, "reason": "geo_find_entities finds it"})),
        Script(text=json.dumps({"choice": 1, "reason": "geo_get_neighbors follows borders"})),
    )
    config = PlannerSettings(profile="full", top_k=8, reflection_rounds=0, memory_k=0)
    plan = await RequestPlanner(finder, encoder, config).plan("Who borders Germany?", model)
    assert plan.choices == {
        "s1": "geo_find_entities",
        "s2_relations": "geo_get_relations",
        "s2": "geo_get_neighbors",
    }
    assert "inserted s2_relations" in plan.notes[-1]


async def test_a_one_call_triage_whose_tool_needs_an_earlier_call_is_decomposed(
    store: InProcessStore, encoder: Encoder, upstream: FakeUpstream, model: UpstreamModel
) -> None:
    """The triage sorts "how many countries border Germany" as one call; the one tool
    picked for it counts a variable that no call has made. Refusing that step left the
    request without a tool (the pack suite's traces of 88feb2f); the triage was wrong,
    so the request is decomposed as a `several` would have been."""
    tools = store.list_tools()
    documents = catalog_documents(tools, RetrieverConfig())
    vectors = embed_documents(encoder, [d.text for d in documents], progress=False)
    finder = CandidateFinder(store, ToolIndex(documents, vectors))
    steps = [
        {"id": "s1", "text": "find the country Germany", "category": "knowledge_graph"},
        {"id": "s2", "text": "the countries bordering it", "category": "knowledge_graph",
         "needs": ["s1"]},
        {"id": "s3", "text": "count them", "category": "knowledge_graph", "needs": ["s2"]},
    ]  # fmt: skip
    upstream.enqueue(
        Script(text="one"),
        Script(text=json.dumps({"choice": 1, "reason": "geo_count counts them"})),
        Script(text=json.dumps({"subtasks": steps})),
        Script(text=json.dumps({"choice": 1, "reason": "geo_find_entities finds it"})),
        Script(text=json.dumps({"choice": 1, "reason": "geo_get_neighbors follows borders"})),
        Script(text=json.dumps({"choice": 1, "reason": "geo_count counts the set"})),
    )
    config = PlannerSettings(profile="full", top_k=8, reflection_rounds=0, memory_k=0, triage=True)
    question = "How many countries border Germany?"
    plan = await RequestPlanner(finder, encoder, config).plan(question, model)
    assert plan.choices == {
        "s1": "geo_find_entities",
        "s2_relations": "geo_get_relations",
        "s2": "geo_get_neighbors",
        "s3": "geo_count",
    }
    assert plan.notes[:2] == [
        "precondition: refused geo_count for s1: it needs variable from one of geo_argmax, "
        "geo_argmin, geo_find_entities, geo_get_neighbors, geo_intersection, and no step "
        "before it calls one",
        "triage: one tool call, but geo_count needs what an earlier call gives: decomposed",
    ]
    assert "inserted s2_relations" in plan.notes[-1]
    assert plan.llm_calls == 6
    assert len(upstream.requests) == 6
