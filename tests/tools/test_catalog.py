"""The pack as catalog tools, run through the executor like any other tools."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from graph_store.embedded import InProcessStore
from graph_store.models import Tool
from proxy.config import ExecutorSettings
from proxy.execute.invocation import Invoker
from proxy.execute.plan import Binding, PlanNode, ToolPlan
from proxy.execute.runner import CatalogRunner
from proxy.execute.scheduler import Outcome, Scheduler
from proxy.tools.packs.math.catalog import builtin_tools, python_tools
from proxy.tools.sandbox.runner import Sandbox

NAMES = [
    "evaluate_expression",
    "calculate_integral",
    "calculate_derivative",
    "vector_operation",
    "run_simulation",
]


@pytest.fixture
async def sandbox() -> AsyncIterator[Sandbox]:
    # No call here is meant to time out (the hostile power is refused by a check); the
    # child's first import of SymPy took over 3 s on a loaded machine.
    box = Sandbox(timeout=60, memory_mb=512)
    yield box
    await box.aclose()


def test_the_pack_becomes_catalog_records() -> None:
    tools = builtin_tools()
    assert [tool.name for tool in tools] == NAMES
    for tool in tools:
        assert tool.endpoint is not None
        assert tool.endpoint.url == f"builtin:{tool.name}"
        assert tool.group == "course_assistant"
        assert tool.category in {"math", "physics"}
        assert tool.response_example is not None
        function = tool.openai_function()["function"]
        assert isinstance(function, dict)
        assert function["parameters"] == tool.parameters
    evaluate = tools[0]
    assert evaluate.required_params() == ["expression"]
    assert set(evaluate.param_schemas()) == {"expression", "variables"}


def test_the_records_import_into_a_store() -> None:
    store = InProcessStore()
    store.upsert_tools(builtin_tools())
    found = store.get_tool(builtin_tools()[4].id)
    assert isinstance(found, Tool)
    assert found.name == "run_simulation"


async def test_a_plan_of_builtin_tools_runs_in_parallel_through_the_executor(
    sandbox: Sandbox,
) -> None:
    tools = {tool.name: tool for tool in builtin_tools()}
    runner = CatalogRunner(tools, Invoker(None, python_tools(sandbox)))
    plan = ToolPlan(
        nodes=(
            PlanNode(
                id="slope",
                tool="calculate_derivative",
                arguments={"expression": "x**3", "at": 2},
            ),
            PlanNode(
                id="area",
                tool="calculate_integral",
                arguments={"expression": "sin(x)", "lower": 0, "upper": "pi"},
            ),
            PlanNode(
                id="product",
                tool="evaluate_expression",
                arguments={"expression": "a*b"},
                inputs=(
                    Binding(source="slope", path="value", target="variables.a"),
                    Binding(source="area", path="value", target="variables.b"),
                ),
            ),
            PlanNode(
                id="hostile", tool="evaluate_expression", arguments={"expression": "9**9**9**9"}
            ),
            PlanNode(id="after", tool="evaluate_expression", needs=("hostile",)),
        )
    )
    run = await Scheduler(ExecutorSettings(call_timeout=120)).execute(plan, runner)
    assert run.records["product"].arguments == {
        "expression": "a*b",
        "variables": {"a": 12.0, "b": 2.0},
    }
    assert run.records["product"].output == {"value": 24.0}
    assert run.records["hostile"].outcome is Outcome.FAILED
    assert "exponents are limited" in run.records["hostile"].error
    assert run.records["after"].outcome is Outcome.SKIPPED
