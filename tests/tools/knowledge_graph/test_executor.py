"""The pack's variables through the executor: a plan's calls share one request's
entity sets (``#0`` made by one call, read by the next), a second request starts with
none, and the runs of one request (a replan) share them when given the same
:class:`~proxy.tools.variables.Variables`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from graph_store.embedded import InProcessStore
from proxy.config import ExecutorSettings, KnowledgeGraphPackSettings
from proxy.execute.plan import PlanNode, ToolPlan
from proxy.execute.scheduler import Outcome
from proxy.execute.service import ToolExecutor
from proxy.llm import UpstreamModel
from proxy.plan.model import Plan, SubTask
from proxy.tools.packs.knowledge_graph.catalog import (
    EDGE_ORIGIN,
    knowledge_graph_edges,
    knowledge_graph_tools,
)
from proxy.tools.variables import Variables
from testing.fake_upstream import FakeUpstream, Script
from tests.tools.knowledge_graph.geography import GEO

GRAPH = KnowledgeGraphPackSettings(name="geo", path=Path("demo"))
TOOLS = {tool.name: tool for tool in knowledge_graph_tools([GRAPH])}


@pytest.fixture
async def executor() -> AsyncIterator[ToolExecutor]:
    running = ToolExecutor(ExecutorSettings(sandbox_timeout=5), graphs=[GRAPH])
    yield running
    await running.aclose()


def node(id: str, tool: str, needs: tuple[str, ...] = (), **arguments: Any) -> PlanNode:
    return PlanNode(id=id, tool=f"geo_{tool}", needs=needs, arguments=arguments)


THREE_HOPS = ToolPlan(
    nodes=(
        node("s1", "find_entities", name="Spain"),
        node("s2", "get_neighbors", ("s1",), variable="#0", relation=GEO + "borders"),
        node("s3", "argmax", ("s2",), variable="#1", attribute=GEO + "population"),
    )
)


async def test_a_plans_calls_share_the_requests_variables(executor: ToolExecutor) -> None:
    executed = await executor.execute(THREE_HOPS, TOOLS, model=None)
    assert executed.run.ok, executed.run.unfinished()
    largest = executed.run.records["s3"].output
    assert isinstance(largest, dict)
    assert largest["entities"] == [{"id": GEO + "France", "name": "France"}]
    assert "France" in executed.compressed["s3"].text  # what the answer reads


async def test_another_request_starts_without_them(executor: ToolExecutor) -> None:
    await executor.execute(THREE_HOPS, TOOLS, model=None)
    alone = ToolPlan(nodes=(node("c", "count", variable="#0"),))
    executed = await executor.execute(alone, TOOLS, model=None)
    record = executed.run.records["c"]
    assert record.outcome is Outcome.FAILED
    assert "no variable '#0' in this request (made so far: none yet)" in record.error


async def test_one_requests_runs_share_them_when_given_its_variables(
    executor: ToolExecutor,
) -> None:
    variables = Variables()
    await executor.execute(THREE_HOPS, TOOLS, model=None, variables=variables)
    replan = ToolPlan(nodes=(node("c", "count", variable="#1"),))
    executed = await executor.execute(replan, TOOLS, model=None, variables=variables)
    assert executed.run.records["c"].output == {"variable": "#1", "count": 2}


def _planned(store: InProcessStore, choices: dict[str, str], *tasks: SubTask) -> ToolPlan:
    return Plan(list(tasks), {k: f"geo_{v}" for k, v in choices.items()}, "llm").tool_plan(store)


def _pick_capital(request: dict[str, Any]) -> Script:
    """The model: Germany for find_entities, then the number listed for geo:capital."""
    prompt = "\n".join(m["content"] for m in request["messages"])
    if "geo_find_entities" in prompt:
        return Script(text=json.dumps({"name": "Germany"}))
    listed = next(line for line in prompt.splitlines() if line.endswith(f'{GEO}capital"'))
    return Script(text=json.dumps({"relation": int(listed.split(".")[0])}))


async def test_a_planned_hop_chooses_its_relation_from_a_numbered_list(
    executor: ToolExecutor, upstream: FakeUpstream, model: UpstreamModel, tmp_path: Path
) -> None:
    """The planner's DAG binds the variable from find_entities and leaves the relation
    to the writer, which offers get_relations' answer as numbers (decoupled generation)."""
    store = InProcessStore(tmp_path)
    store.upsert_tools(list(TOOLS.values()))
    store.replace_edges(EDGE_ORIGIN, knowledge_graph_edges([GRAPH]))
    plan = _planned(
        store,
        {"s1": "find_entities", "s2": "get_relations", "s3": "get_neighbors"},
        SubTask(id="s1", text="Find Germany."),
        SubTask(id="s2", text="List Germany's relations.", needs=("s1",)),
        SubTask(id="s3", text="Follow its capital relation.", needs=("s1", "s2")),
    )
    upstream.responder = _pick_capital
    executed = await executor.execute(plan, TOOLS, model)
    assert executed.run.ok, executed.run.unfinished()
    capital = executed.run.records["s3"].output
    assert isinstance(capital, dict)
    assert capital["entities"] == [{"id": GEO + "Berlin", "name": "Berlin"}]
    assert executed.run.records["s3"].arguments == {"variable": "#0", "relation": GEO + "capital"}
    assert len(upstream.requests) == 2  # find_entities' name, get_neighbors' relation
