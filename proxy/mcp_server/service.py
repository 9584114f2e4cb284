"""The catalog as a few tools for MCP clients, without HTTP: search it, call one tool.

``search_tools`` ranks the catalog for a query with the index orchestrate mode plans
over (the same hybrid search a sub-task's roots come from, clauses included with
``retriever.clauses``) and returns each hit with
its schema; ``call_tool`` runs one catalog tool with the arguments given, through the
executor's invoker (so under its egress policy and credentials, an MCP tool through
its server's session) within ``executor.call_timeout``, under the same per-client,
per-host and process-wide slots as a plan's calls (twelve ``factorial(10**8)`` through
``call_tool`` had run twelve sandboxes at once beside the slots). Only tools the
catalog holds now are called: an MCP server that is down has none.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from pydantic import JsonValue

from graph_store.models import Tool
from proxy.catalog.service import CatalogService
from proxy.errors import InvalidRequest, NotFound, ToolTimeout
from proxy.execute.invocation import tool_host
from proxy.execute.service import ToolExecutor
from proxy.plan.model import Candidate
from proxy.tenancy.keys import ToolScope, scoped

MAX_RESULTS = 50
#: The longest query ``search_tools`` embeds, as the console's search (each character
#: is encoder work: a 51 KB query once cost 51.7 s of CPU).
MAX_QUERY_CHARS = 2000


class CatalogTools:
    def __init__(self, catalog: CatalogService, executor: ToolExecutor) -> None:
        self._catalog = catalog
        self._executor = executor

    async def search(
        self, query: str, k: int = 10, scope: ToolScope | None = None
    ) -> list[dict[str, JsonValue]]:
        """The ``k`` catalog tools that best fit ``query``, best first, with their schemas;
        of those ``scope`` allows (a key's), when given."""
        if len(query) > MAX_QUERY_CHARS:
            raise InvalidRequest(
                f"the query is {len(query)} characters long; at most {MAX_QUERY_CHARS} are "
                "searched",
                param="query",
            )
        catalog = await self._catalog.get()
        planner = catalog.planner
        count = max(1, min(k, MAX_RESULTS))

        def retrieve() -> list[tuple[Candidate, Tool | None]]:
            # embedding, search and the tools' records (read from the store the first
            # time): one hop off the loop
            vector = planner.encoder.encode([query])[0]
            hits = planner.within(scope).finder.retrieve(query, vector, count)
            tools = scoped(catalog.tools, scope)
            return [(hit, tools.get(hit.tool)) for hit in hits]

        found: list[dict[str, JsonValue]] = []
        for hit, tool in await asyncio.to_thread(retrieve):
            if len(found) == count:
                break
            if tool is not None:
                found.append(
                    {
                        "name": tool.name,
                        "description": tool.description,
                        "category": tool.category,
                        "parameters": tool.parameters,
                        "score": round(hit.score, 4),
                    }
                )
        return found

    async def call(
        self,
        name: str,
        arguments: Mapping[str, JsonValue],
        client: str = "",
        scope: ToolScope | None = None,
    ) -> JsonValue:
        """Run catalog tool ``name`` (one ``scope`` allows, when given) in one of
        ``client``'s slots (see :class:`~proxy.execute.scheduler.Scheduler`); a
        :class:`~proxy.errors.ToolError` when it fails. The call's time starts once it
        holds its slots."""
        catalog = await self._catalog.get()
        tool = await asyncio.to_thread(scoped(catalog.tools, scope).get, name)  # a store read
        if tool is None:
            raise NotFound(f"no tool {name!r} in the catalog", param="name", code="tool_not_found")
        timeout = self._executor.settings.call_timeout
        async with self._executor.scheduler.slots(client, tool_host(tool)):
            try:
                async with asyncio.timeout(timeout):
                    return await self._executor.invoker.invoke(tool, arguments)
            except TimeoutError:
                raise ToolTimeout(f"{name} did not answer in {timeout:g} s", param=name) from None
