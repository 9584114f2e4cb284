"""The pack's variables through the executor: a plan's calls share one request's
entity sets (``#0`` made by one call, read by the next), a second request starts with
none, and the runs of one request (a replan) share them when given the same
:class:`~proxy.tools.variables.Variables`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from proxy.config import Executor
from proxy.config import KnowledgeGraphPack as GraphSettings
from proxy.execute.plan import PlanNode, ToolPlan
from proxy.execute.scheduler import Outcome
from proxy.execute.service import ToolExecutor
from proxy.tools.knowledge_graph.catalog import knowledge_graph_tools
from proxy.tools.variables import Variables
from tests.tools.knowledge_graph.geography import GEO

GRAPH = GraphSettings(name="geo", path=Path("demo"))
TOOLS = {tool.name: tool for tool in knowledge_graph_tools([GRAPH])}


@pytest.fixture
async def executor() -> AsyncIterator[ToolExecutor]:
    running = ToolExecutor(Executor(sandbox_timeout=5), graphs=[GRAPH])
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
