"""The tool registry, without HTTP: parse (an OpenAPI document given by its URL is
fetched first, :mod:`proxy.registry.fetch`), check by calling, store.

A new HTTP tool is called once before it is stored (the thesis's custom-API page
does the same), through the executor's invoker and so under the egress policy.
With arguments from ``test_arguments`` the call must succeed. Without them the
arguments are made up from the schema (defaults, examples, first enum values,
placeholders), so a 4xx answer is expected and accepted: it proves the endpoint is
there. Unreachable, timed out, refused by the egress policy or 5xx is a failed
check, and nothing of the batch is stored. Built-in tools need no check.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import JsonValue

from graph_store.errors import InvalidItem
from graph_store.ingest._common import Parsed
from graph_store.ingest.catalog import unique_tools
from graph_store.ingest.openai_spec import parse_openai
from graph_store.ingest.openapi import parse_openapi
from graph_store.models import Tool
from graph_store.store import GraphStore
from proxy.errors import Conflict, InvalidRequest, NotFound, ToolError, ToolHttpStatus
from proxy.execute.invocation import ToolInvoker
from proxy.registry.protocol import RegisterTools
from proxy.tools.builtin import BUILTIN_SCHEME

_SOURCE = Path("registry")
_T = TypeVar("_T")
Fetch = Callable[[str], Awaitable[dict[str, JsonValue]]]  # an OpenAPI document's URL → it


@dataclass(frozen=True, slots=True)
class Check:
    tool: str
    outcome: str  # "passed", "reachable" (a 4xx to made-up arguments) or "skipped"
    detail: str = ""


class ToolRegistry:
    def __init__(
        self,
        store: GraphStore,
        invoker: ToolInvoker,
        on_change: Callable[[], Awaitable[None]] | None = None,
        fetch: Fetch | None = None,
    ) -> None:
        self._store = store
        self._invoker = invoker
        self._fetch = fetch
        self._on_change = on_change or _nothing
        self._writing = asyncio.Lock()

    async def register(self, request: RegisterTools, store: bool) -> tuple[list[Tool], list[Check]]:
        """Parse, check and (unless ``store`` is false) save the tools of ``request``."""
        document = await self._document(request)
        tools = await asyncio.to_thread(_parse, request, document)  # 60,000 tools: seconds
        async with self._writing:
            taken = await asyncio.to_thread(self._fresh, self._store.names)
            tools, clashes = unique_tools(tools, taken)
            if clashes:
                raise Conflict(clashes[0].problem, param=clashes[0].item, code="name_taken")
            checks = [
                await self._check(tool, request.test_arguments.get(tool.name)) for tool in tools
            ]
            if store:
                await asyncio.to_thread(self._store.upsert_tools, tools)
                await self._on_change()
        return tools, checks

    async def get(self, key: str) -> Tool:
        tool = await asyncio.to_thread(self._fresh, lambda: self._store.get_tool(key))
        if tool is None:
            raise NotFound(f"no tool {key!r} in the catalog", param="tool", code="tool_not_found")
        return tool

    async def list(self, category: str | None) -> list[Tool]:
        return await asyncio.to_thread(self._fresh, lambda: self._store.list_tools(category))

    async def delete(self, key: str) -> Tool:
        async with self._writing:
            tool = await self.get(key)
            await asyncio.to_thread(self._store.delete_tools, [tool.id])
            await self._on_change()
        return tool

    async def _document(self, request: RegisterTools) -> dict[str, JsonValue] | None:
        """The OpenAPI document of ``request``: sent, fetched from its URL, or none."""
        if request.openapi_url is None:
            return request.openapi
        if self._fetch is None:
            raise InvalidRequest(
                "this registry fetches no document: send it as 'openapi'", param="openapi_url"
            )
        return await self._fetch(request.openapi_url)

    def _fresh(self, read: Callable[[], _T]) -> _T:
        """``read`` after taking in what other processes (workers sharing the embedded
        store) wrote."""
        self._store.refresh()
        return read()

    async def _check(self, tool: Tool, arguments: dict[str, JsonValue] | None) -> Check:
        if tool.endpoint is None or tool.endpoint.url.startswith(BUILTIN_SCHEME):
            return Check(tool.name, "skipped", "no HTTP endpoint")
        given = arguments is not None
        try:
            await self._invoker.invoke(
                tool, sample_arguments(tool) if arguments is None else arguments
            )
        except ToolError as exc:
            client_error = isinstance(exc, ToolHttpStatus) and 400 <= exc.http_status < 500
            if client_error and not given:
                return Check(tool.name, "reachable", exc.message)
            raise InvalidRequest(
                f"the test call of {tool.name} failed: {exc.message}",
                param="test_arguments",
                code="tool_check_failed",
                status=422,
            ) from None
        return Check(tool.name, "passed")


async def _nothing() -> None:
    pass


def sample_arguments(tool: Tool) -> dict[str, JsonValue]:
    """Arguments for a tool's required parameters, made up from its schema."""
    properties = tool.parameters.get("properties")
    required = tool.parameters.get("required")
    if not isinstance(properties, dict) or not isinstance(required, list):
        return {}
    return {
        name: _sample(properties.get(name))
        for name in required
        if isinstance(name, str) and name in properties
    }


_PLACEHOLDERS: dict[str, JsonValue] = {
    "integer": 1,
    "number": 1,
    "boolean": True,
    "array": [],
    "object": {},
}


def _sample(schema: JsonValue) -> JsonValue:
    if not isinstance(schema, dict):
        return "test"
    for key in ("default", "example"):
        if key in schema:
            return schema[key]
    examples, enum = schema.get("examples"), schema.get("enum")
    if isinstance(examples, list) and examples:
        return examples[0]
    if isinstance(enum, list) and enum:
        return enum[0]
    kind = schema.get("type")
    return _PLACEHOLDERS.get(kind, "test") if isinstance(kind, str) else "test"


def _parse(request: RegisterTools, document: dict[str, JsonValue] | None) -> list[Tool]:
    try:
        if request.openai is not None:
            parsed = parse_openai(_SOURCE, request.openai)
        else:
            parsed = parse_openapi(_SOURCE, document)
    except InvalidItem as exc:
        raise InvalidRequest(exc.problem, param=exc.item, code="invalid_tool") from None
    except RecursionError:  # a backstop: inlining is bounded (graph_store.ingest.openapi)
        raise InvalidRequest("the tools' schemas nest too deeply", code="invalid_tool") from None
    _refuse_errors(parsed)
    if not parsed.tools:
        raise InvalidRequest("the request holds no tool", code="invalid_tool")
    if request.category:
        return [tool.model_copy(update={"category": request.category}) for tool in parsed.tools]
    return parsed.tools


def _refuse_errors(parsed: Parsed) -> None:
    if parsed.errors:
        first = parsed.errors[0]
        raise InvalidRequest(
            f"{first.item}: {first.problem}", param=first.item, code="invalid_tool"
        )
