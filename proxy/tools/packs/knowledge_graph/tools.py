"""The pack's tools over one graph: the model's arguments in, JSON out.

A tool that yields entities stores them as a request variable (``#0``, ``#1``…;
:mod:`proxy.tools.variables`) and answers with its name, how many, and the first few
by name; later calls take that name. A ``variable`` argument may also be one entity's
id as an answer showed it, so a single call can start from a known entity.

Every wrong argument is refused with what would be right, which the argument writer
reads back (the paper's error feedback): a variable that was never made, with the
ones that were; a relation or attribute the entities do not have, with the ones
they do.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from pydantic import JsonValue

from proxy.errors import ToolInputRejected
from proxy.tools.packs.database._values import text_argument
from proxy.tools.packs.knowledge_graph.backend import GraphBackend
from proxy.tools.variables import EntitySet, current_variables, is_variable_name

SAMPLE = 10  # entities an answer names
_LISTED = 60  # relations or attributes an error lists


@dataclass(slots=True)
class KnowledgeGraph:
    """One configured graph; its backend opens on the first call (loading a file of
    triples or reaching a server is not start-up's work)."""

    name: str
    max_entities: int
    opener: Callable[[], Awaitable[GraphBackend]]
    _backend: GraphBackend | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def backend(self) -> GraphBackend:
        async with self._lock:
            if self._backend is None:
                self._backend = await self.opener()
            return self._backend

    async def aclose(self) -> None:
        if self._backend is not None:
            await self._backend.aclose()
            self._backend = None


async def find_entities(graph: KnowledgeGraph, arguments: Mapping[str, JsonValue]) -> JsonValue:
    name = text_argument(arguments, "name")
    backend = await graph.backend()
    ids = await backend.find_entities(name, graph.max_entities + 1)
    if not ids:
        raise ToolInputRejected(
            f"no entity named {name!r} in the {graph.name} graph (nor one whose name "
            "contains it); try another spelling or a shorter part of the name",
            param="name",
        )
    return await _new_variable(graph, ids)


async def get_relations(graph: KnowledgeGraph, arguments: Mapping[str, JsonValue]) -> JsonValue:
    name, entities = _entities(graph, arguments, "variable")
    backend = await graph.backend()
    relations = await backend.relations(entities.ids)
    return {"variable": name, "relations": list(relations)}


async def get_neighbors(graph: KnowledgeGraph, arguments: Mapping[str, JsonValue]) -> JsonValue:
    name, entities = _entities(graph, arguments, "variable")
    relation = text_argument(arguments, "relation").strip()
    backend = await graph.backend()
    relations = await backend.relations(entities.ids)
    if relation not in relations:
        raise ToolInputRejected(
            f"relation {relation!r} does not lead from {name}; its relations: {_listed(relations)}",
            param="relation",
        )
    ids = await backend.neighbors(entities.ids, relation, graph.max_entities + 1)
    return await _new_variable(graph, ids)


async def get_attributes(graph: KnowledgeGraph, arguments: Mapping[str, JsonValue]) -> JsonValue:
    name, entities = _entities(graph, arguments, "variable")
    backend = await graph.backend()
    attributes = await backend.attributes(entities.ids)
    return {"variable": name, "attributes": dict(attributes)}


async def argmax(graph: KnowledgeGraph, arguments: Mapping[str, JsonValue]) -> JsonValue:
    return await _extreme(graph, arguments, highest=True)


async def argmin(graph: KnowledgeGraph, arguments: Mapping[str, JsonValue]) -> JsonValue:
    return await _extreme(graph, arguments, highest=False)


async def intersection(graph: KnowledgeGraph, arguments: Mapping[str, JsonValue]) -> JsonValue:
    _, first = _entities(graph, arguments, "variable1")
    _, second = _entities(graph, arguments, "variable2")
    shared = set(second.ids)
    ids = [entity for entity in first.ids if entity in shared]
    return await _new_variable(graph, ids, truncated=first.truncated or second.truncated)


async def count(graph: KnowledgeGraph, arguments: Mapping[str, JsonValue]) -> JsonValue:
    name, entities = _entities(graph, arguments, "variable")
    counted: dict[str, JsonValue] = {"variable": name, "count": len(entities.ids)}
    if entities.truncated:
        counted["at_least"] = True  # the set was cut at max_entities
    return counted


async def _extreme(
    graph: KnowledgeGraph, arguments: Mapping[str, JsonValue], *, highest: bool
) -> JsonValue:
    name, entities = _entities(graph, arguments, "variable")
    attribute = text_argument(arguments, "attribute").strip()
    backend = await graph.backend()
    attributes = await backend.attributes(entities.ids)
    if attribute not in attributes:
        raise ToolInputRejected(
            f"no attribute {attribute!r} on {name}; its attributes: {_listed(list(attributes))}",
            param="attribute",
        )
    found = await backend.extreme(entities.ids, attribute, highest)
    if found is None:
        raise ToolInputRejected(f"no values of {attribute!r} on {name}", param="attribute")
    answer = await _new_variable(graph, list(found.ids))
    return {**answer, "value": found.value}


def _entities(
    graph: KnowledgeGraph, arguments: Mapping[str, JsonValue], param: str
) -> tuple[str, EntitySet]:
    """The set an argument names: a variable of this request, or one entity's id."""
    text = text_argument(arguments, param).strip()
    if not is_variable_name(text):
        return text, EntitySet(graph.name, (text,))
    entities = current_variables().get(text, param)
    if entities.graph != graph.name:
        raise ToolInputRejected(
            f"{param}: {text} holds entities of the {entities.graph} graph, not {graph.name}",
            param=param,
        )
    return text, entities


async def _new_variable(
    graph: KnowledgeGraph, ids: Sequence[str], *, truncated: bool = False
) -> dict[str, JsonValue]:
    cut = truncated or len(ids) > graph.max_entities
    entities = EntitySet(graph.name, tuple(ids[: graph.max_entities]), cut)
    name = current_variables().add(entities)
    backend = await graph.backend()
    labels = await backend.labels(entities.ids[:SAMPLE])
    made: dict[str, JsonValue] = {"variable": name, "count": len(entities.ids)}
    if cut:
        made["truncated"] = True
    made["entities"] = [
        {"id": entity, "name": labels.get(entity)} for entity in entities.ids[:SAMPLE]
    ]
    return made


def _listed(names: Sequence[str]) -> str:
    shown = ", ".join(names[:_LISTED])
    if len(names) > _LISTED:
        shown += f" … ({len(names) - _LISTED} more)"
    return shown or "none"
