"""The planner's records: sub-tasks, candidates, decisions, and the plan they make.

A :class:`Plan` keeps every candidate list and every decision for the request trace,
and converts to the executor's :class:`~proxy.execute.plan.ToolPlan`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from graph_store.models import ALL_KINDS, EdgeKind, Tool
from graph_store.store import GraphStore
from proxy.execute.plan import NODE_ID_PATTERN, Binding, PlanNode, ToolPlan

#: ``learned``: a tool the tenant ran after the one before, where the graph has no edge.
Source = Literal["retrieval", "graph", "learned"]
_ID = re.compile(NODE_ID_PATTERN)


class SubTask(BaseModel):
    """One step of the request: ``needs`` names the sub-tasks whose results it uses."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    text: str = Field(min_length=1)
    category: str | None = None
    needs: tuple[str, ...] = ()


def subtask_problems(subtasks: Sequence[SubTask]) -> list[str]:
    """Why these sub-tasks are no DAG: empty, bad or duplicate ids, unknown needs,
    self-loops, cycles. Empty when they are one."""
    if not subtasks:
        return ["the plan has no sub-tasks"]
    problems = []
    ids = [task.id for task in subtasks]
    problems += [
        f"sub-task id {i!r} is not 1-64 of [A-Za-z0-9_.:-]" for i in ids if not _ID.match(i)
    ]
    problems += [
        f"sub-task id {i!r} is used twice" for i in sorted({i for i in ids if ids.count(i) > 1})
    ]
    known = set(ids)
    for task in subtasks:
        for need in task.needs:
            if need == task.id:
                problems.append(f"sub-task {task.id} needs itself")
            elif need not in known:
                problems.append(f"sub-task {task.id} needs unknown sub-task {need!r}")
    if not problems and len(topological(subtasks)) != len(subtasks):
        cycle = sorted(known - {task.id for task in topological(subtasks)})
        problems.append(f"the sub-tasks {', '.join(cycle)} form a cycle")
    return problems


def topological(subtasks: Sequence[SubTask]) -> list[SubTask]:
    """Each after the sub-tasks it needs, ties in the given order (stops short on a cycle)."""
    done: set[str] = set()
    order: list[SubTask] = []
    pending = list(subtasks)
    while pending:
        ready = [t for t in pending if all(n in done or n == t.id for n in t.needs)]
        ready = [t for t in ready if t.id not in t.needs]
        if not ready:
            break
        first = ready[0]
        order.append(first)
        done.add(first.id)
        pending.remove(first)
    return order


@dataclass(frozen=True, slots=True)
class Candidate:
    """A tool offered for a sub-task, and why: retrieval or a graph edge."""

    tool: str  # the catalog name
    tool_id: str
    score: float
    similarity: float
    source: Source
    edge: EdgeKind | None = None
    weight: float = 0.0
    via: str = ""  # the name of the chosen tool the edge leaves from


@dataclass(slots=True)
class Decision:
    """One move of the selection: the list shown, the pick (None: none fits), why."""

    subtask: str
    candidates: list[Candidate]
    chosen: str | None
    reason: str
    kind: Literal["pick", "backtrack", "reflect", "fallback"] = "pick"


@dataclass
class Plan:
    subtasks: list[SubTask]
    choices: dict[str, str]  # sub-task id → tool name
    policy: str
    decisions: list[Decision] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # degradations and why
    llm_calls: int = 0
    tokens: int = 0
    no_tools: bool = False  # the request needs no tool at all
    #: the sub-tasks as the decomposition or the triage made them, before any precondition
    #: repair: a backtrack's re-plan chooses tools for them again
    made: tuple[SubTask, ...] = ()

    def trace(self) -> dict[str, JsonValue]:
        """The plan as the request trace records it: every list shown and every move."""
        return {
            "policy": self.policy,
            "no_tools": self.no_tools,
            "notes": list(self.notes),
            "llm_calls": self.llm_calls,
            "tokens": self.tokens,
            "subtasks": [task.model_dump(mode="json") for task in self.subtasks],
            "choices": dict(self.choices),
            "decisions": [_decision_trace(d) for d in self.decisions],
        }

    def links(self) -> list[tuple[str, str]]:
        """(tool, tool) for every ``needs`` edge whose two ends have a tool."""
        pairs = []
        for task in self.subtasks:
            for need in task.needs:
                if need in self.choices and task.id in self.choices:
                    pairs.append((self.choices[need], self.choices[task.id]))
        return pairs

    def tool_plan(self, store: GraphStore) -> ToolPlan:
        """The executor's DAG: one node per sub-task with a tool; a dependency edge
        that carries a resource the tool takes becomes a binding."""
        nodes = []
        for task in topological(self.subtasks):
            name = self.choices.get(task.id)
            tool = store.get_tool(name) if name else None
            if tool is None:
                continue
            needs = tuple(n for n in _tool_needs(task, self) if n in self.choices)
            inputs = tuple(_bindings(store, tool, needs, self))
            nodes.append(
                PlanNode(id=task.id, tool=tool.name, task=task.text, needs=needs, inputs=inputs)
            )
        return ToolPlan(nodes=tuple(nodes))


def _decision_trace(decision: Decision) -> dict[str, JsonValue]:
    return {
        "subtask": decision.subtask,
        "kind": decision.kind,
        "chosen": decision.chosen,
        "reason": decision.reason,
        "candidates": [
            {
                "tool": c.tool,
                "score": round(c.score, 4),
                "similarity": round(c.similarity, 4),
                "source": c.source,
                "edge": c.edge.value if c.edge is not None else None,
                "weight": c.weight,
                "via": c.via,
            }
            for c in decision.candidates
        ],
    }


def _tool_needs(task: SubTask, plan: Plan) -> list[str]:
    """The needs of ``task``, a sub-task left without a tool replaced by what it needs."""
    by_id = {t.id: t for t in plan.subtasks}
    found: list[str] = []
    stack = list(task.needs)
    seen: set[str] = set()
    while stack:
        need = stack.pop(0)
        if need in seen:
            continue
        seen.add(need)
        if need in plan.choices:
            found.append(need)
        elif need in by_id:
            stack.extend(by_id[need].needs)
    return found


def _bindings(store: GraphStore, tool: Tool, needs: Sequence[str], plan: Plan) -> list[Binding]:
    params = tool.param_schemas()
    bindings = []
    for need in needs:
        source = store.get_tool(plan.choices[need])
        if source is None:
            continue
        for edge, other in store.edge_rows([source.id], ALL_KINDS, "out"):
            if other.id == tool.id and edge.kind != EdgeKind.SEQUENTIAL and edge.resource:
                target = edge.resource if edge.resource in params else ""
                bindings.append(Binding(source=need, path=edge.resource, target=target))
                break
    return bindings
