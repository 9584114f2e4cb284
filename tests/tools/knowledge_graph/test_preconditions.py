"""The pack's preconditions as STRONG_DEP edges of the tool graph: what each tool needs
(a variable, a relation, an attribute) and which tools give it, in the store the
planner reads its neighbours from."""

from __future__ import annotations

from pathlib import Path

from graph_store.embedded import InProcessStore
from graph_store.models import EdgeKind
from proxy.config import KnowledgeGraphPackSettings
from proxy.tools.packs.knowledge_graph.catalog import knowledge_graph_edges, knowledge_graph_tools

GRAPHS = [
    KnowledgeGraphPackSettings(name="geo", path=Path("demo")),
    KnowledgeGraphPackSettings(name="map", path=Path("x.ttl")),
]


def _needs(store: InProcessStore, names: dict[str, str], tool: str) -> dict[str, str]:
    """The tools that feed ``tool`` (by name), with what flows from each."""
    rows = store.edge_rows([names[tool]], [EdgeKind.STRONG_DEP], "in")
    by_id = {tool_id: name for name, tool_id in names.items()}
    return {by_id[edge.src]: edge.resource for edge, _ in rows}


def test_each_tool_is_fed_by_the_tools_that_make_what_it_needs(tmp_path: Path) -> None:
    store = InProcessStore(tmp_path)
    tools = knowledge_graph_tools(GRAPHS)
    store.upsert_tools(tools)
    store.replace_edges("pack:knowledge_graph", knowledge_graph_edges(GRAPHS))
    names = {tool.name: tool.id for tool in tools}
    makers = {"geo_find_entities", "geo_get_neighbors", "geo_argmax", "geo_argmin",
              "geo_intersection"}  # fmt: skip
    assert _needs(store, names, "geo_find_entities") == {}  # the start of every question
    assert _needs(store, names, "geo_get_neighbors") == {
        **{maker: "variable" for maker in makers - {"geo_get_neighbors"}},
        "geo_get_relations": "relations",
    }
    assert _needs(store, names, "geo_argmax") == {
        **{maker: "variable" for maker in makers - {"geo_argmax"}},
        "geo_get_attributes": "attributes",
    }
    assert set(_needs(store, names, "geo_count")) == makers
    # One graph's variables mean nothing to another's tools.
    assert not any(name.startswith("map_") for name in _needs(store, names, "geo_count"))
