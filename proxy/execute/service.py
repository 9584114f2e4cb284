"""The executor as the app holds it: built once from the settings, closed at shutdown.

``ToolExecutor`` owns what lives as long as the process: the scheduler's limits,
the shared httpx client under the catalog's egress policy, the built-in tools'
sandbox, the field-list cache (Redis when configured) and the argument writer.
Per request, :meth:`ToolExecutor.execute` runs a plan with the request's model and
returns every call's record with the compressed text of each output (compressed as
its call finished, inside the call's timeout: :mod:`proxy.execute.runner`);
orchestrate mode calls it between planning and answering.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import httpx
from pydantic import JsonValue
from redis.asyncio import Redis

from graph_store.models import Tool
from proxy.config import DatabasePackSettings, ExecutorSettings, KnowledgeGraphPackSettings
from proxy.execute.arguments import ArgumentWriter
from proxy.execute.compress import Compressed, Compressor
from proxy.execute.egress import EgressPolicy
from proxy.execute.fields import FieldSelector
from proxy.execute.invocation import HttpInvoker, Invoker, ToolInvoker, make_http_client
from proxy.execute.plan import ToolPlan
from proxy.execute.runner import CatalogRunner
from proxy.execute.scheduler import Observer, Outcome, PlanRun, Scheduler
from proxy.kv import Bound, open_key_value
from proxy.llm import ChatModel
from proxy.tools.packs import database as database_pack
from proxy.tools.packs.knowledge_graph.catalog import KnowledgeGraphPack
from proxy.tools.packs.math.catalog import python_tools
from proxy.tools.sandbox.runner import Sandbox
from proxy.tools.variables import Variables

#: Field lists kept (one per tool and version; the oldest goes), and the largest.
FIELD_LISTS = Bound("field_lists", 4096, 64 * 1024)


@dataclass(slots=True)
class ExecutedPlan:
    run: PlanRun
    compressed: dict[str, Compressed] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)  # LLM replies per call's arguments
    reused: set[str] = field(default_factory=set)  # calls answered from an earlier turn
    rejected: dict[str, str] = field(default_factory=dict)  # the tool's error the writer saw
    tool_seconds: float = 0.0  # wall time some tool was being called (overlaps once)

    def answer_inputs(self) -> dict[str, str]:
        """What the answering LLM may read: the compressed outputs the plan marks for it."""
        return {
            node_id: result.text
            for node_id, result in self.compressed.items()
            if self.run.records[node_id].node.feeds_answer
        }


class ToolExecutor:
    """``client``: an httpx client to share (made with :func:`make_http_client`; the
    caller closes it); by default the executor makes and closes its own. ``mcp``: how
    ``mcp://`` endpoints are called (the app's MCP sources), if any are configured.
    ``databases``: the database pack's databases (``packs.database``), whose tools run
    in process beside the built-in ones; ``graphs``: the knowledge-graph pack's graphs
    (``packs.knowledge_graph``), likewise."""

    def __init__(
        self,
        settings: ExecutorSettings,
        redis: Redis | None = None,
        client: httpx.AsyncClient | None = None,
        mcp: ToolInvoker | None = None,
        databases: Sequence[DatabasePackSettings] = (),
        graphs: Sequence[KnowledgeGraphPackSettings] = (),
    ) -> None:
        self.settings = settings
        self.policy = EgressPolicy.from_settings(settings)
        self.scheduler = Scheduler(settings)
        self.sandbox = Sandbox(settings.sandbox_timeout, settings.sandbox_memory_mb)
        self._owns_client = client is None
        self._client = client or make_http_client(self.policy, settings)
        self.databases = database_pack.open_pack(databases)
        python = python_tools(self.sandbox)
        self.graphs = KnowledgeGraphPack.open(graphs)
        python.functions.update(self.graphs.functions())
        self.choices = self.graphs.choices()
        if self.databases is not None:
            python.functions.update(self.databases.functions())
            self.choices.update(self.databases.choices())
        self.invoker = Invoker(HttpInvoker(self._client, settings), python, mcp)
        cache = open_key_value(redis, FIELD_LISTS)
        self.compressor = Compressor(settings.compress_chars, FieldSelector(cache))
        self.writer = ArgumentWriter()

    @property
    def client(self) -> httpx.AsyncClient:
        """The HTTP client the catalog's tools share, under its egress policy."""
        return self._client

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()
        await self.sandbox.aclose()
        await self.graphs.aclose()
        if self.databases is not None:  # their pools close sockets: a blocking call
            await asyncio.to_thread(self.databases.close)

    def runner(
        self,
        tools: dict[str, Tool],
        model: ChatModel | None,
        reuse: Mapping[str, JsonValue] | None = None,
        background: Mapping[str, str] | None = None,
        variables: Variables | None = None,
        destructive: bool = True,
    ) -> CatalogRunner:
        return CatalogRunner(
            tools,
            self.invoker,
            writer=self.writer,
            compressor=self.compressor,
            model=model,
            reuse=reuse,
            background=background,
            variables=variables,
            destructive=destructive,
            choices=self.choices,
        )

    async def execute(
        self,
        plan: ToolPlan,
        tools: Mapping[str, Tool],
        model: ChatModel | None,
        observer: Observer | None = None,
        *,
        reuse: Mapping[str, JsonValue] | None = None,
        background: Mapping[str, str] | None = None,
        client: str = "",
        variables: Variables | None = None,
        destructive: bool = True,
    ) -> ExecutedPlan:
        """Run ``plan`` over ``tools``; ``model`` writes arguments and picks fields.

        ``reuse``: earlier calls' outputs by :func:`~proxy.execute.runner.call_key`;
        ``background``: earlier results the argument writer may read, by label;
        ``client``: whose plan it is, for the per-client limit on each host;
        ``variables``: the request's entity sets, when it runs more than one plan;
        ``destructive``: whether tools marked destructive may run (orchestrate mode: only
        under an ``Idempotency-Key``, see :func:`~proxy.execute.runner.is_destructive`).
        """
        # A catalog reads a tool from its store when first asked: not on the event loop.
        read = (
            tools if isinstance(tools, dict) else await asyncio.to_thread(plan_tools, tools, plan)
        )
        runner = self.runner(
            read, model, reuse, background, variables=variables, destructive=destructive
        )
        run = await self.scheduler.execute(plan, runner, observer, client=client)
        compressed = {
            node_id: runner.compressed[node_id]
            for node_id, record in run.records.items()
            if record.outcome is Outcome.OK
        }
        return ExecutedPlan(
            run,
            compressed,
            attempts=runner.attempts,
            reused=runner.reused,
            rejected=runner.rejected,
            tool_seconds=runner.tools.seconds,
        )


def plan_tools(tools: Mapping[str, Tool], plan: ToolPlan) -> dict[str, Tool]:
    """The tools ``plan`` names, each read now. A catalog reads a tool from its store the
    first time it is asked for (a blocking call, a Bolt round trip behind Neo4j), so this
    runs in a worker thread: the event loop never waits on the store."""
    return {node.tool: tool for node in plan.nodes if (tool := tools.get(node.tool)) is not None}
