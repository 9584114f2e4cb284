"""Select mode, without HTTP: rewrite a request's ``tools`` to the few it needs.

The embedding model, its batcher and caches are the app's encoder service's
(:mod:`proxy.encoder.service`), shared with the catalog; select mode asks for it on
its first request. The retriever's errors are translated here, where they enter the
proxy. With ``toolgraph.gate`` the learned no-tool gate goes first: when no tool of
the request serves it, the request goes upstream with no tools at all.

Tools the client marks ``defer_loading`` are the ones to choose from, the others always
go (:mod:`proxy.select.deferred`); within a conversation the chosen ones stay loaded, in
the order first loaded, so the forwarded prefix keeps the upstream's prompt cache
(:mod:`proxy.select.loaded`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from redis.asyncio import Redis

from proxy import metrics
from proxy.context import RequestContext, ToolSearch
from proxy.encoder.service import EncoderService, RetrieverUnavailable
from proxy.errors import InvalidRequest, StoreUnavailable
from proxy.protocol.chat import ChatCompletionRequest, ToolgraphOptions
from proxy.select.deferred import is_deferred, split_deferred
from proxy.select.loaded import (
    LoadedTool,
    LoadedTools,
    conversation_key,
    merge_loaded,
    tool_digest,
)
from retriever.config import RetrieverConfig
from retriever.conversation import conversation_query
from retriever.documents import forced_name, function_name
from retriever.errors import InvalidTools, ModelNotFound

if TYPE_CHECKING:
    from retriever.batching import BatchingEmbedder
    from retriever.gate.catalog import CatalogMemory
    from retriever.gate.model import Gate
    from retriever.select import Selection

#: Request fields that only make sense with ``tools``: dropped with them.
_TOOL_FIELDS = ("tools", "tool_choice", "parallel_tool_calls")

log = logging.getLogger(__name__)


class SelectService:
    """``encoders``: the app's embedding model (closed by its owner); ``redis``: where
    each conversation's loaded tools are kept, when configured."""

    def __init__(
        self, config: RetrieverConfig, encoders: EncoderService, redis: Redis | None = None
    ) -> None:
        self._config = config
        self._encoders = encoders
        self._gate: tuple[Gate, BatchingEmbedder] | None = None  # loaded on first use
        self._gate_memory: CatalogMemory | None = None  # the tool lists sent lately
        self._lock = asyncio.Lock()
        self._loaded = LoadedTools.open(redis, config)

    async def rewrite(
        self, request: ChatCompletionRequest, body: dict[str, Any], context: RequestContext
    ) -> dict[str, Any]:
        """``body`` with ``tools`` cut down to the ones the conversation needs."""
        tools = body.get("tools")
        if not tools:
            raise InvalidRequest(
                "select mode needs the tools to choose from: 'tools' is missing or empty",
                param="tools",
                code="missing_tools",
            )
        options = request.toolgraph or ToolgraphOptions()  # select is the configured default
        embedder = await self._encoders.embedder("select mode")
        fixed, candidates = split_deferred(tools)
        tool_choice = body.get("tool_choice")
        gated = options.gate and not _forces_tool(tool_choice)
        if gated and not await self._needs_tools(candidates, body):
            metrics.TOOLS_SELECTED.labels("select", "offered").inc(len(tools))
            if fixed:
                return {**body, "tools": fixed}
            return {k: v for k, v in body.items() if k not in _TOOL_FIELDS}
        forced = forced_name(tool_choice)
        if forced is not None and forced in {function_name(tool) for tool in fixed}:
            tool_choice = None  # a tool that always goes: nothing to force among the rest
        top_k = options.top_k or self._config.select_top_k
        key = conversation_key(context.tenant, body["messages"])
        previous = await self._previous(key)
        threshold = (
            self._config.select_threshold if options.threshold is None else options.threshold
        )
        selection = await self._select(
            embedder, candidates, body["messages"], top_k, threshold, tool_choice
        )
        chosen = selection.tools
        if previous is not None:
            chosen = await self._keep_loaded(key, context.tenant, previous, candidates, selection)
        if any(is_deferred(tool) for tool in tools):
            query = conversation_query(body["messages"], self._config.query_turns)
            loaded = tuple(name for tool in chosen if (name := function_name(tool)) is not None)
            context.tool_search = ToolSearch(query, loaded)
        return {**body, "tools": [*fixed, *chosen]}

    async def _select(
        self,
        embedder: BatchingEmbedder,
        candidates: list[Any],
        messages: list[Any],
        top_k: int,
        threshold: float,
        tool_choice: Any,
    ) -> Selection:
        from retriever.select import SelectOptions, ToolSelector

        options = SelectOptions(top_k, threshold, self._config.select_min_tools)
        stats = embedder.stats
        hits, misses = stats.cache_hits, stats.cache_misses
        try:
            selector = ToolSelector(embedder, self._config)
            selection = await selector.select(candidates, messages, options, tool_choice)
        except InvalidTools as exc:
            raise InvalidRequest(str(exc), param=exc.param, code="invalid_tools") from None
        metrics.CACHE_LOOKUPS.labels("embedding", "hit").inc(stats.cache_hits - hits)
        metrics.CACHE_LOOKUPS.labels("embedding", "miss").inc(stats.cache_misses - misses)
        metrics.TOOLS_SELECTED.labels("select", "offered").inc(selection.offered)
        metrics.TOOLS_SELECTED.labels("select", "injected").inc(len(selection.tools))
        log.info(
            "select: %d of %d tools forwarded (%s), %d enums trimmed",
            len(selection.tools),
            selection.offered,
            ", ".join(selection.kept),
            selection.trimmed_enums,
        )
        return selection

    async def _previous(self, key: str) -> list[LoadedTool] | None:
        """The tools the conversation loaded on earlier turns; None when they are not
        kept (off, or the store is unreachable: the turn is served, only the prefix is lost)."""
        if not self._config.select_keep_loaded:
            return None
        try:
            return await self._loaded.get(key)
        except StoreUnavailable as exc:
            log.warning("select: loaded tools not read: %s", exc)
            return None

    async def _keep_loaded(
        self,
        key: str,
        tenant: str,
        previous: list[LoadedTool],
        candidates: list[Any],
        selection: Selection,
    ) -> list[Any]:
        """The tools this conversation loaded before, in load order, then this turn's new
        ones (:mod:`proxy.select.loaded`); tools that are not functions go first, as they
        came. With ``select_add_per_turn``, a later turn adds only its best ones not
        loaded yet: every tool that joins changes the cached prefix. With
        ``select_add_when_needed``, a later turn whose best-ranked tool is loaded (as the
        client defines it now) adds nothing: what is loaded serves it."""
        offered = {name: tool_digest(tool) for tool in candidates if (name := function_name(tool))}
        others = [tool for tool in selection.tools if function_name(tool) is None]
        by_name = {name: tool for tool in selection.tools if (name := function_name(tool))}
        limit = self._config.select_add_per_turn
        ranked = selection.kept[:limit] if previous and limit else selection.kept
        current = {tool.name for tool in previous if offered.get(tool.name) == tool.digest}
        if self._config.select_add_when_needed and ranked and ranked[0] in current:
            ranked = []
        chosen = [LoadedTool(name, offered[name], by_name[name]) for name in ranked]
        loaded = merge_loaded(previous, offered, chosen, self._config.select_max_loaded)
        if loaded != previous:
            try:
                await self._loaded.put(key, loaded, tenant)
            except StoreUnavailable as exc:
                log.warning("select: loaded tools not kept: %s", exc)
        return [*others, *(tool.forwarded for tool in loaded)]

    async def _needs_tools(self, tools: list[Any], body: dict[str, Any]) -> bool:
        """The no-tool gate (``toolgraph.gate``) on the client's tools."""
        from retriever.conversation import conversation_query
        from retriever.documents import function_fields
        from retriever.gate.catalog import CatalogMemory, decide_for_tools
        from retriever.gate.features import gate_document
        from retriever.select import check_tools

        try:
            functions = check_tools(tools)
        except InvalidTools as exc:
            raise InvalidRequest(str(exc), param=exc.param, code="invalid_tools") from None
        gate, embedder = await self._gate_parts()
        documents = [gate_document(function_fields(spec, name)) for name, spec in functions]
        query = conversation_query(body["messages"], self._config.query_turns)
        if self._gate_memory is None:
            self._gate_memory = CatalogMemory()
        decision = await decide_for_tools(gate, embedder, documents, query, self._gate_memory)
        log.info("select: gate %s (score %.4f)", decision.label, decision.score)
        return decision.needs_tool

    async def _gate_parts(self) -> tuple[Gate, BatchingEmbedder]:
        async with self._lock:
            if self._gate is None:
                try:
                    self._gate = await asyncio.to_thread(self._load_gate)
                except ModelNotFound as exc:
                    raise RetrieverUnavailable(f"the no-tool gate is unavailable: {exc}") from None
            return self._gate

    def _load_gate(self) -> tuple[Gate, BatchingEmbedder]:
        from retriever.embedder import load_encoder
        from retriever.gate.model import configured_gate

        gate = configured_gate(self._config, at="opt_in")
        encoder = load_encoder(gate.encoder_config(self._config))
        return gate, self._encoders.batching(encoder)  # the model's own when it is the same


def _forces_tool(tool_choice: object) -> bool:
    """``required`` or a named function: the client wants a call, whatever the gate says."""
    return tool_choice == "required" or isinstance(tool_choice, dict)
