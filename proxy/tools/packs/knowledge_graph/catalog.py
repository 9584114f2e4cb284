"""The knowledge-graph pack as catalog tools: one set of eight per configured graph.

Each graph named ``name`` in ``packs.knowledge_graph`` gives ``<name>_find_entities``,
``<name>_get_relations``… with ``builtin:<tool>`` endpoints, in the group
``knowledge_graph_<name>`` and the category ``knowledge_graph``;
:class:`KnowledgeGraphPack` holds the graphs (opened by their first call) and their
in-process functions for the executor's :class:`~proxy.tools.builtin.PythonTools`
and where each tool's variables, relations and attributes are chosen from
(:meth:`KnowledgeGraphPack.choices`: the argument writer numbers them, see
:mod:`proxy.execute.choices`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import JsonValue

from graph_store.models import Edge, EdgeKind, Tool
from proxy.config import KnowledgeGraphPackSettings
from proxy.tools.builtin import ChoicePaths, PythonTool
from proxy.tools.packs.configured import ToolSpec, pack_choices, pack_functions, pack_tools
from proxy.tools.packs.knowledge_graph import tools
from proxy.tools.packs.knowledge_graph.backend import GraphBackend
from proxy.tools.packs.knowledge_graph.tools import KnowledgeGraph

#: The graph shipped with the package (``path: demo``): see demo/README.md.
DEMO = Path(__file__).parent / "demo" / "geography.ttl"

_VARIABLE: JsonValue = {
    "type": "string",
    "description": "A variable an earlier call returned (#0, #1…), or one entity's id.",
}
#: A variable is one an earlier call of the same graph answered with.
_A_VARIABLE: ChoicePaths = {"variable": ("variable",)}
_SET: dict[str, JsonValue] = {
    "variable": "#1",
    "count": 2,
    "entities": [{"id": "http://example.org/geo/Paris", "name": "Paris"}],
}


SPECS: tuple[ToolSpec[KnowledgeGraph], ...] = (
    ToolSpec(
        "find_entities",
        tools.find_entities,
        "Find the entities of the {what} with a name (a place, a person, a film): the "
        "starting point of every question; returns a variable naming them.",
        {"name": {"type": "string", "description": "The entity's name."}},
        ("name",),
        {**_SET, "variable": "#0"},
    ),
    ToolSpec(
        "get_relations",
        tools.get_relations,
        "List the relations that lead from (or, written ^relation, to) the entities of a "
        "variable in the {what}.",
        {"variable": _VARIABLE},
        ("variable",),
        {"variable": "#0", "relations": ["http://example.org/geo/capital", "^..."]},
        _A_VARIABLE,
    ),
    ToolSpec(
        "get_neighbors",
        tools.get_neighbors,
        "Follow one relation (as get_relations listed it) from the entities of a variable "
        "in the {what}; returns a new variable with the entities reached.",
        {"variable": _VARIABLE, "relation": {"type": "string", "description": "A relation."}},
        ("variable", "relation"),
        _SET,
        {**_A_VARIABLE, "relation": ("relations",)},
    ),
    ToolSpec(
        "get_attributes",
        tools.get_attributes,
        "List the attributes (numbers, dates, text) of the entities of a variable in the "
        "{what}, each with an example value.",
        {"variable": _VARIABLE},
        ("variable",),
        {"variable": "#1", "attributes": {"http://example.org/geo/population": 2100000}},
        _A_VARIABLE,
    ),
    ToolSpec(
        "argmax",
        tools.argmax,
        "Keep the entities of a variable in the {what} with the highest value of an "
        "attribute (largest, most, latest); returns a new variable and the value.",
        {"variable": _VARIABLE, "attribute": {"type": "string", "description": "An attribute."}},
        ("variable", "attribute"),
        {**_SET, "value": 2100000},
        {**_A_VARIABLE, "attribute": ("attributes",)},
    ),
    ToolSpec(
        "argmin",
        tools.argmin,
        "Keep the entities of a variable in the {what} with the lowest value of an "
        "attribute (smallest, fewest, earliest); returns a new variable and the value.",
        {"variable": _VARIABLE, "attribute": {"type": "string", "description": "An attribute."}},
        ("variable", "attribute"),
        {**_SET, "value": 1200},
        {**_A_VARIABLE, "attribute": ("attributes",)},
    ),
    ToolSpec(
        "intersection",
        tools.intersection,
        "Keep the entities two variables of the {what} have in common; returns a new variable.",
        {"variable1": _VARIABLE, "variable2": _VARIABLE},
        ("variable1", "variable2"),
        _SET,
        {"variable1": ("variable",), "variable2": ("variable",)},
    ),
    ToolSpec(
        "count",
        tools.count,
        "Count the entities of a variable in the {what} (how many).",
        {"variable": _VARIABLE},
        ("variable",),
        {"variable": "#2", "count": 7},
        _A_VARIABLE,
    ),
)


def knowledge_graph_tools(settings: Sequence[KnowledgeGraphPackSettings]) -> list[Tool]:
    """Every configured graph's tools as catalog records."""
    return [tool for graph in settings for tool in _tools_of(graph)]


def _tools_of(graph: KnowledgeGraphPackSettings) -> list[Tool]:
    return pack_tools("knowledge_graph", graph.name, graph.description, SPECS)


#: Origin of the preconditions' edges in the tool graph (replaced as a whole).
EDGE_ORIGIN = "pack:knowledge_graph"

_SETS = ("get_relations", "get_neighbors", "get_attributes", "argmax", "argmin", "intersection",
         "count")  # fmt: skip
_MAKERS = ("find_entities", "get_neighbors", "argmax", "argmin", "intersection")

#: (the tool whose output is needed, the tool that needs it, the field of that output
#: that flows): a variable from a call that makes one, a relation from get_relations'
#: ``relations``, an attribute from get_attributes' ``attributes``. The field is the
#: edge's resource: the plan binds ``variable`` to the argument of that name, while
#: ``relations`` and ``attributes`` name no argument, so the argument writer chooses
#: one of them by number (:meth:`KnowledgeGraphPack.choices`).
PRECONDITIONS: tuple[tuple[str, str, str], ...] = (
    *((maker, user, "variable") for maker in _MAKERS for user in _SETS if maker != user),
    ("get_relations", "get_neighbors", "relations"),
    ("get_attributes", "argmax", "attributes"),
    ("get_attributes", "argmin", "attributes"),
)
_WHAT = {"variable": "a variable", "relations": "a relation", "attributes": "an attribute"}


def knowledge_graph_edges(settings: Sequence[KnowledgeGraphPackSettings]) -> list[Edge]:
    """The tools' preconditions as STRONG_DEP edges of the tool graph: the planner offers
    a dependent step the tools its predecessor's output can feed."""
    edges = []
    for graph in settings:
        ids = {tool.name: tool.id for tool in _tools_of(graph)}
        edges += [
            Edge(
                src=ids[f"{graph.name}_{source}"],
                dst=ids[f"{graph.name}_{target}"],
                kind=EdgeKind.STRONG_DEP,
                weight=1.0,
                resource=resource,
                origin=EDGE_ORIGIN,
                reason=f"{target} needs {_WHAT[resource]} that {source} returns",
            )
            for source, target, resource in PRECONDITIONS
        ]
    return edges


@dataclass
class KnowledgeGraphPack:
    """The configured graphs; each backend opens on its graph's first call."""

    graphs: list[KnowledgeGraph] = field(default_factory=list)

    @classmethod
    def open(cls, settings: Sequence[KnowledgeGraphPackSettings]) -> KnowledgeGraphPack:
        return cls([KnowledgeGraph(g.name, g.max_entities, _opener(g)) for g in settings])

    def functions(self) -> dict[str, PythonTool]:
        """Each graph's tools by catalog name, for the executor."""
        return pack_functions(self.graphs, SPECS)

    def choices(self) -> dict[str, ChoicePaths]:
        """Each graph's tools by catalog name: where their parameters' values are listed."""
        return pack_choices(self.graphs, SPECS)

    async def aclose(self) -> None:
        for graph in self.graphs:
            await graph.aclose()


def _opener(settings: KnowledgeGraphPackSettings) -> Callable[[], Awaitable[GraphBackend]]:
    async def open_backend() -> GraphBackend:
        from proxy.tools.packs.knowledge_graph.bolt import BoltGraph
        from proxy.tools.packs.knowledge_graph.rdf import RdfGraph
        from proxy.tools.packs.knowledge_graph.sparql import EmbeddedStore, SparqlEndpoint

        if settings.kind == "bolt":
            return BoltGraph(str(settings.url), settings.name_property, settings.timeout)
        if settings.url is not None:
            return RdfGraph(SparqlEndpoint(settings.url, settings.timeout))
        path = DEMO if str(settings.path) == "demo" else Path(str(settings.path))
        store = await asyncio.to_thread(EmbeddedStore.open, path, settings.timeout)
        return RdfGraph(store)

    return open_backend
