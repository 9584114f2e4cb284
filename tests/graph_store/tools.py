"""Small hand-made tools for the store tests."""

from __future__ import annotations

from graph_store.models import Edge, EdgeKind, Provenance, Tool
from graph_store.names import tool_id


def make_tool(name: str, category: str = "travel", group: str = "hotels", **fields: object) -> Tool:
    values: dict[str, object] = {
        "id": tool_id("test", group, name),
        "name": name,
        "original_name": name,
        "description": f"{name} does things",
        "category": category,
        "group": group,
        "provenance": Provenance(format="test", file="tools.py", item=name),
    }
    values.update(fields)
    return Tool.model_validate(values)


def edge(src: Tool, dst: Tool, kind: EdgeKind, weight: float, **fields: object) -> Edge:
    values: dict[str, object] = {"src": src.id, "dst": dst.id, "kind": kind, "weight": weight}
    values.update(fields)
    return Edge.model_validate(values)
