"""Sub-task validation and the conversion of a plan into the executor's DAG."""

from __future__ import annotations

import pytest

from graph_store.embedded import InProcessStore
from graph_store.models import Edge, EdgeKind, Provenance, Tool
from proxy.plan.model import Plan, SubTask, subtask_problems, topological


def task(id: str, *needs: str) -> SubTask:
    return SubTask(id=id, text=f"do {id}", needs=needs)


@pytest.mark.parametrize(
    ("subtasks", "problem"),
    [
        ([], "the plan has no sub-tasks"),
        ([task("a", "a")], "sub-task a needs itself"),
        ([task("a", "zz")], "sub-task a needs unknown sub-task 'zz'"),
        ([task("a"), task("a")], "sub-task id 'a' is used twice"),
        ([task("a", "c"), task("b", "a"), task("c", "b")], "the sub-tasks a, b, c form a cycle"),
        ([task("bad id!")], "sub-task id 'bad id!' is not 1-64 of [A-Za-z0-9_.:-]"),
    ],
)
def test_each_problem_is_named(subtasks: list[SubTask], problem: str) -> None:
    assert subtask_problems(subtasks) == [problem]


def test_topological_order_puts_needs_first() -> None:
    order = topological([task("c", "a", "b"), task("b", "a"), task("a")])
    assert [t.id for t in order] == ["a", "b", "c"]
    assert subtask_problems([task("c", "a", "b"), task("b", "a"), task("a")]) == []


def tool(name: str, params: dict[str, str], outputs: list[str]) -> Tool:
    return Tool(
        id=name,
        name=name,
        original_name=name,
        parameters={"type": "object", "properties": {p: {"type": t} for p, t in params.items()}},
        response_schema={"type": "object", "properties": {o: {"type": "string"} for o in outputs}},
        provenance=Provenance(format="test"),
    )


def test_tool_plan_binds_resources_and_skips_steps_without_a_tool() -> None:
    store = InProcessStore()
    store.upsert_tools(
        [
            tool("find_hotel", {"city": "string"}, ["hotel_id"]),
            tool("book", {"hotel_id": "string"}, []),
        ]
    )
    store.upsert_edges(
        [
            Edge(
                src="find_hotel",
                dst="book",
                kind=EdgeKind.STRONG_DEP,
                weight=1.0,
                resource="hotel_id",
            )
        ]
    )
    subtasks = [task("s1"), task("s2", "s1"), task("s3", "s2")]
    # s2 found no tool: s3 then depends on what s2 needed.
    plan = Plan(subtasks, {"s1": "find_hotel", "s3": "book"}, "graph")
    dag = plan.tool_plan(store)
    assert [n.id for n in dag.nodes] == ["s1", "s3"]
    booked = dag.node("s3")
    assert booked.needs == ("s1",)
    assert [(b.source, b.path, b.target) for b in booked.inputs] == [("s1", "hotel_id", "hotel_id")]
    assert plan.links() == []  # no needs edge joins two sub-tasks that both have a tool
