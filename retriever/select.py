"""Select mode: rank a client's own tools for the conversation and keep the few it needs.

The client sent ``tools`` (often hundreds) and will run whichever the model calls;
the upstream sees only the top ``k`` for the recent turns, ranked as the catalog's
search ranks (:mod:`retriever.tool_ranking`: BM25 fused with the cosine, which with
``retriever.clauses`` is a tool's best over the whole text and each of its clauses),
whose cosine passes a threshold, and never none: when nothing passes, the best ones go
anyway. A tool that ``tool_choice`` names
is always kept. Long ``enum`` lists of the kept tools are cut to the values nearest the
conversation, keeping any value the conversation names and the default, so every
parameter stays valid. Names are not changed, so the model's ``tool_calls`` already
name the client's tools.

A tool's embedding is cached under its document text, which is a function of its
name, description and parameters: a client that sends the same tools every turn
embeds them once, and with Redis configured (``LayeredCache``) a process that has
never seen them finds the vectors another one computed. A long list is checked and
turned into documents on a worker thread, and embedded pass by pass on the embedder's
(:mod:`retriever.batching`), so the event loop keeps serving other requests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from pydantic import JsonValue

from graph_store.names import is_valid_name
from retriever.batching import BatchingEmbedder
from retriever.clauses import split_clauses
from retriever.config import RetrieverConfig
from retriever.conversation import conversation_query
from retriever.documents import document_text, forced_name, function_fields, function_name
from retriever.errors import InvalidTools
from retriever.tool_ranking import Ranking, ToolRanker

ToolSpec = dict[str, JsonValue]

#: Longer tool lists are checked and turned into documents on a worker thread, off the
#: event loop (5,000 toolbench tools took about 0.2 s of it).
INLINE_TOOLS = 64


@dataclass(frozen=True)
class Selection:
    tools: list[ToolSpec]
    kept: list[str]
    scores: dict[str, float]
    offered: int
    trimmed_enums: int


@dataclass(frozen=True)
class SelectOptions:
    top_k: int
    threshold: float
    min_tools: int = 1


class ToolSelector:
    def __init__(self, embedder: BatchingEmbedder, config: RetrieverConfig) -> None:
        self._embedder = embedder
        self._config = config
        self._ranker = ToolRanker(config)

    async def select(
        self,
        tools: Sequence[JsonValue],
        messages: Sequence[Mapping[str, JsonValue]],
        options: SelectOptions,
        tool_choice: JsonValue = None,
    ) -> Selection:
        if len(tools) > INLINE_TOOLS:  # thousands of tools: milliseconds per hundred
            functions, texts = await asyncio.to_thread(self._documents, tools)
        else:
            functions, texts = self._documents(tools)
        forced = forced_name(tool_choice)
        if forced is not None and forced not in {name for name, _ in functions}:
            raise InvalidTools(
                f"tool_choice names the function {forced!r}, which is not in tools",
                param="tool_choice",
            )
        query = conversation_query(messages, self._config.query_turns)
        clauses = split_clauses(query) if self._config.clauses else []
        # The clauses join the query's pass: a request of one clause embeds one text.
        vectors = await self._embedder.embed([query or " ", *clauses, *texts])
        rows = 1 + len(clauses)
        query_rows = vectors[0] if rows == 1 else vectors[:rows]
        ranking = self._ranker.rank(query_rows, query, texts, vectors[rows:])
        keep = choose_tools(ranking, options, [name for name, _ in functions], forced)
        kept_names = {functions[i][0] for i in keep}
        forwarded: list[ToolSpec] = []
        trimmed = 0
        position = {name: i for i, (name, _) in enumerate(functions)}
        for tool in tools:
            assert isinstance(tool, dict)
            name = function_name(tool)
            if name is None:
                forwarded.append(tool)  # not a function tool: nothing to rank
            elif name in kept_names:
                copy_, count = await self._trim_enums(tool, query, vectors[0])
                forwarded.append(copy_)
                trimmed += count
        place = {row: number for number, row in enumerate(ranking.order)}
        ranked = [functions[i][0] for i in sorted(keep, key=place.__getitem__)]
        return Selection(
            tools=forwarded,
            kept=ranked,
            scores={n: round(float(ranking.cosines[position[n]]), 4) for n in ranked},
            offered=len(tools),
            trimmed_enums=trimmed,
        )

    def _documents(
        self, tools: Sequence[JsonValue]
    ) -> tuple[list[tuple[str, ToolSpec]], list[str]]:
        """:func:`tool_documents`, and the list's BM25 index ready for the ranking."""
        functions, texts = tool_documents(tools)
        self._ranker.prepare(texts)
        return functions, texts

    async def _trim_enums(
        self, tool: ToolSpec, query: str, query_vector: np.ndarray
    ) -> tuple[ToolSpec, int]:
        long_enums = [
            name
            for name, spec in _properties(tool).items()
            if isinstance(spec, dict)
            and isinstance(spec.get("enum"), list)
            and len(spec["enum"]) > self._config.enum_min_values
        ]
        if not long_enums:
            return tool, 0
        trimmed, properties = _copy_to_properties(tool)
        for name in long_enums:
            spec = properties[name] = dict(properties[name])
            spec["enum"] = await self._nearest_values(name, spec, query, query_vector)
        return trimmed, len(long_enums)

    async def _nearest_values(
        self, name: str, spec: dict[str, Any], query: str, query_vector: np.ndarray
    ) -> list[JsonValue]:
        values: list[JsonValue] = list(spec["enum"])
        vectors = await self._embedder.embed([f"{name}: {value}" for value in values])
        order = np.argsort(-(vectors @ query_vector), kind="stable")
        lowered = query.lower()
        keep = {int(i) for i in order[: self._config.enum_top_k]}
        keep |= {i for i, v in enumerate(values) if str(v).lower() in lowered and len(str(v)) > 1}
        if "default" in spec:
            keep |= {i for i, v in enumerate(values) if v == spec["default"]}
        return [values[i] for i in sorted(keep)]


def tool_documents(tools: Sequence[JsonValue]) -> tuple[list[tuple[str, ToolSpec]], list[str]]:
    """The function tools (:func:`check_tools`) and the text each is embedded as."""
    functions = check_tools(tools)
    return functions, [document_text(function_fields(spec, name)) for name, spec in functions]


def check_tools(tools: Sequence[JsonValue]) -> list[tuple[str, ToolSpec]]:
    """The function tools as (name, function), or :class:`InvalidTools` naming the first
    bad one: a missing or invalid name, a name given twice, a ``parameters`` that is not
    an object schema."""
    functions: list[tuple[str, ToolSpec]] = []
    seen: dict[str, int] = {}
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise InvalidTools(f"tools[{i}] must be an object", param=f"tools.[{i}]")
        if tool.get("type") != "function":
            continue
        function = tool.get("function")
        where = f"tools.[{i}].function"
        if not isinstance(function, dict):
            raise InvalidTools(f"tools[{i}] has no function object", param=where)
        name = function.get("name")
        if not isinstance(name, str) or not is_valid_name(name):
            raise InvalidTools(
                f"tools[{i}].function.name must be 1-64 characters of a-z, A-Z, 0-9, _ and -",
                param=f"{where}.name",
            )
        if name in seen:
            raise InvalidTools(
                f"tools[{i}] and tools[{seen[name]}] are both named {name!r}",
                param=f"{where}.name",
            )
        seen[name] = i
        _check_schema(function.get("parameters"), f"{where}.parameters")
        functions.append((name, function))
    return functions


def _check_schema(schema: JsonValue, param: str) -> None:
    if schema is None:
        return
    problem = None
    if not isinstance(schema, dict):
        problem = "must be a JSON Schema object"
    elif schema.get("type", "object") != "object":
        problem = "must be a schema of type 'object'"
    elif not isinstance(schema.get("properties", {}), dict):
        problem = "'properties' must be an object"
    elif not isinstance(required := schema.get("required", []), list) or not all(
        isinstance(r, str) for r in required
    ):
        problem = "'required' must be a list of property names"
    else:
        for key, spec in schema.get("properties", {}).items():  # type: ignore[union-attr]
            enum = spec.get("enum") if isinstance(spec, dict) else None
            if not isinstance(spec, dict) and not isinstance(spec, bool):
                problem = f"property {key!r} must be a schema object"
            elif enum is not None and (not isinstance(enum, list) or not enum):
                problem = f"the enum of {key!r} must be a non-empty list"
            if problem:
                break
    if problem:
        raise InvalidTools(f"{param} {problem}", param=param)


def choose_tools(
    ranking: Ranking, options: SelectOptions, names: list[str], forced: str | None
) -> list[int]:
    """The rows to forward: the ranking's first ``top_k`` whose cosine passes the
    threshold, at least ``min_tools`` of its first ones, and the one ``forced`` names."""
    order, scores = ranking.order, ranking.cosines
    keep = [i for i in order[: options.top_k] if scores[i] >= options.threshold]
    if len(keep) < options.min_tools:
        keep = order[: min(options.min_tools, options.top_k, len(order))]
    if forced is not None and names.index(forced) not in keep:
        keep.append(names.index(forced))
    return keep


def _properties(tool: ToolSpec) -> dict[str, Any]:
    """The parameters' ``properties`` of a function tool (checked by :func:`check_tools`)."""
    function = tool.get("function")
    params = function.get("parameters") if isinstance(function, dict) else None
    properties = params.get("properties") if isinstance(params, dict) else None
    return cast(dict[str, Any], properties) if isinstance(properties, dict) else {}


def _copy_to_properties(tool: ToolSpec) -> tuple[ToolSpec, dict[str, Any]]:
    """A copy of ``tool`` whose dicts down to ``properties`` are new, the rest shared.

    Only those dicts change; a deep copy also recursed once per level of every other
    property, so a schema nested some 400 levels raised RecursionError (a 500).
    """
    function = dict(cast(dict[str, Any], tool["function"]))
    parameters = dict(function["parameters"])
    properties = dict(parameters["properties"])
    parameters["properties"] = properties
    function["parameters"] = parameters
    return {**tool, "function": function}, properties
