"""The tool DAG the executor runs: what the planner hands over.

A :class:`ToolPlan` is a list of :class:`PlanNode`: one tool call each, with the
sub-task it serves, the arguments known in advance, and :class:`Binding` s that say
which output of which earlier node fills which input. A node runs once every node
it ``needs`` or binds from has succeeded. The model checks itself on construction:
unique ids, known references, no self-loops, no cycles.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

NODE_ID_PATTERN = r"^[A-Za-z0-9_.:-]{1,64}$"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Binding(_Model):
    """An output of node ``source`` (the value at ``path`` in it) feeds input ``target``.

    ``path`` uses dots and list indices (``results.0.id``); empty means the whole
    output. ``target`` is an argument name, dotted to reach inside an object argument
    (``variables.f``); empty means the value is context for argument generation only.
    """

    source: str = Field(pattern=NODE_ID_PATTERN)
    path: str = ""
    target: str = ""


class PlanNode(_Model):
    id: str = Field(pattern=NODE_ID_PATTERN)
    tool: str = Field(min_length=1, max_length=64, description="The catalog tool's name.")
    task: str = Field(default="", description="The sub-task this call serves.")
    needs: tuple[str, ...] = Field(default=(), description="Nodes that must succeed first.")
    inputs: tuple[Binding, ...] = ()
    arguments: dict[str, JsonValue] = Field(
        default_factory=dict, description="Arguments known when planning."
    )
    feeds_answer: bool = Field(default=True, description="Its output goes to the answer.")
    timeout: float | None = Field(default=None, gt=0, description="Overrides the call timeout.")

    @property
    def dependencies(self) -> tuple[str, ...]:
        """Every node this one waits for, in first-mention order."""
        seen = dict.fromkeys(self.needs)
        seen.update(dict.fromkeys(binding.source for binding in self.inputs))
        return tuple(seen)


class ToolPlan(_Model):
    nodes: tuple[PlanNode, ...]

    @model_validator(mode="after")
    def _check_graph(self) -> Self:
        ids = [node.id for node in self.nodes]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"duplicate node ids: {', '.join(duplicates)}")
        known = set(ids)
        for node in self.nodes:
            for dependency in node.dependencies:
                if dependency == node.id:
                    raise ValueError(f"node {node.id} depends on itself")
                if dependency not in known:
                    raise ValueError(f"node {node.id} depends on unknown node {dependency}")
        if len(list(self.topological_order())) != len(self.nodes):
            raise ValueError("the plan has a cycle")
        return self

    def node(self, node_id: str) -> PlanNode:
        for node in self.nodes:
            if node.id == node_id:
                return node
        raise KeyError(node_id)

    def dependents(self) -> dict[str, list[str]]:
        """For each node, the nodes that wait for it."""
        waiting: dict[str, list[str]] = {node.id: [] for node in self.nodes}
        for node in self.nodes:
            for dependency in node.dependencies:
                waiting[dependency].append(node.id)
        return waiting

    def topological_order(self) -> Iterator[PlanNode]:
        """Nodes in an order where each comes after its dependencies (Kahn's algorithm).

        Stops early on a cycle; the validator relies on that.
        """
        by_id = {node.id: node for node in self.nodes}
        remaining = {node.id: len(node.dependencies) for node in self.nodes}
        waiting = self.dependents()
        ready = [node_id for node_id, count in remaining.items() if count == 0]
        while ready:
            node_id = ready.pop(0)
            yield by_id[node_id]
            for dependent in waiting[node_id]:
                remaining[dependent] -= 1
                if remaining[dependent] == 0:
                    ready.append(dependent)

    def lineage(self) -> dict[str, tuple[str, ...]]:
        """For each node, every node it waits for directly or through others, in
        topological order (its dependencies' dependencies first)."""
        rank = {node.id: i for i, node in enumerate(self.topological_order())}
        found: dict[str, set[str]] = {}
        for node in self.topological_order():
            found[node.id] = set(node.dependencies).union(*(found[d] for d in node.dependencies))
        return {node: tuple(sorted(above, key=rank.__getitem__)) for node, above in found.items()}

    def critical_path(self, durations: dict[str, float]) -> float:
        """The longest chain of ``durations`` through the DAG: the best possible wall time."""
        finish: dict[str, float] = {}
        for node in self.topological_order():
            start = max((finish[d] for d in node.dependencies), default=0.0)
            finish[node.id] = start + durations[node.id]
        return max(finish.values(), default=0.0)
