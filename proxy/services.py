"""``AppServices``: everything the routes use, opened from the settings once per app.

:func:`open_services` builds the collaborators in dependency order and registers each
one's closing on an :class:`~contextlib.AsyncExitStack`, so they close in reverse
order at shutdown, and whatever was opened before a failed start is closed too. The
app's lifespan opens them (``create_app(settings)``); a caller that opens them itself
passes them in (``create_app(settings, services)``) and closes them afterwards. Routers
read them through :func:`services_of`, never through ``app.state`` attributes.

The one part that may outlive an app is the in-process embedding cache: the tests
share one per session, so that a tool list is embedded once per run, not once per
test (the encoder itself is loaded once per process by ``retriever.embedder``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Coroutine
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING

import aiohttp
from pydantic import SecretStr
from redis.asyncio import Redis
from starlette.requests import HTTPConnection

from graph_store.store import GraphStore, open_store
from proxy import metrics
from proxy.browser_guard import open_proxy_warning
from proxy.catalog.service import CatalogService
from proxy.chat.service import ChatService
from proxy.config import Settings
from proxy.encoder.service import EncoderService
from proxy.errors import StoreUnavailable
from proxy.execute.egress import EgressPolicy
from proxy.execute.service import ToolExecutor
from proxy.extras import check_extras
from proxy.learning.service import Learner
from proxy.learning.store import open_learned_store
from proxy.logs import startup_line
from proxy.mcp.admin import McpRegistry
from proxy.mcp.permits import Permits
from proxy.mcp.registered import MCP_SERVERS_CHANNEL, ServerList, open_server_list
from proxy.mcp.sources import McpSources
from proxy.mcp_server.endpoint import McpEndpoint
from proxy.mcp_server.requests import RequestTools
from proxy.mcp_server.service import CatalogTools
from proxy.modes import ChatMode, Modes, ObserveTools, Rewrite
from proxy.orchestrate.notices import CatalogNotices
from proxy.orchestrate.records import Stores
from proxy.orchestrate.service import Orchestrator
from proxy.protocol.chat import Mode
from proxy.readiness import Check, Loading, Readiness, http_check, neo4j_check, redis_check
from proxy.registry.fetch import OpenApiFetcher
from proxy.registry.service import ToolRegistry
from proxy.relayed.models import ModelCatalog
from proxy.relayed.service import RelayService
from proxy.responses_api.native import NativeResponses
from proxy.responses_api.service import ResponsesService
from proxy.responses_api.store import ResponseStore
from proxy.select.service import SelectService
from proxy.tenancy.callers import Authenticator
from proxy.tenancy.keys import open_key_store
from proxy.tenancy.limits import open_limiter
from proxy.tools.packs.math.catalog import builtin_tools
from proxy.upstream import ModelRouter, Upstreams
from proxy.upstream.relay import RelayUpstream, make_session
from proxy.upstream.translated import LiteLLMUpstream, load_litellm

if TYPE_CHECKING:
    from retriever.cache import LRUCache

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AppServices:
    """The app's services, typed; built by :func:`open_services`."""

    settings: Settings
    router: ModelRouter
    modes: Modes  # chat completions' dispatch table
    responses: ResponsesService  # the Responses API, over the same modes
    orchestrator: Orchestrator
    relayed: RelayService  # embeddings, completions, moderations
    models: ModelCatalog  # GET /v1/models
    registry: ToolRegistry | None  # None without an admin key: the registry API is off
    mcp_registry: McpRegistry | None  # the same, for MCP servers
    mcp_endpoint: McpEndpoint  # /mcp: the catalog for MCP clients
    readiness: Readiness
    authenticator: Authenticator  # client keys: who a request is
    admin_key: bytes | None
    learner: Learner  # what traffic taught each tenant (the learning admin API)


def services_of(connection: HTTPConnection) -> AppServices:
    """The services of the app serving ``connection``."""
    services: AppServices = connection.app.state.services
    return services


async def open_services(
    settings: Settings, stack: AsyncExitStack, embeddings: LRUCache | None = None
) -> AppServices:
    """Every service of the app, each closed by ``stack``; ``embeddings``: an
    in-process embedding cache to share (else the encoder service makes its own).

    In steps, each opening what the next ones need: the shared stores, the embedding
    model (the encoder service) and select mode, the upstreams, the engine (tool
    sources, executor, catalog, orchestrate mode), the registries, then what serves
    requests. ``stack`` closes them in reverse."""
    check_extras(settings)
    stack.callback(metrics.forget_process, os.getpid())
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    router = ModelRouter(settings)
    if router.has_litellm_routes():
        load_litellm()  # seconds of import, paid before the first request rather than in it
    redis = _redis(settings, stack)
    encoders = await _encoders(settings, stack, redis, embeddings)
    select = SelectService(settings.retriever, encoders, redis)
    session, relay, upstreams = _upstreams(settings, stack)
    engine = await _engine(settings, stack, redis, encoders, router, upstreams)
    notices = CatalogNotices(redis, engine.catalog.changed)
    await stack.enter_async_context(_listening(notices))
    registry, mcp_registry = await _registries(settings, stack, redis, engine, notices)
    _preload(settings, stack, engine.catalog)
    authenticator = Authenticator(
        _key_bytes(settings.master_key),
        open_key_store(settings.data_dir, redis),
        open_limiter(redis),
    )
    endpoint = await _mcp_endpoint(settings, stack, engine, authenticator)
    modes = _modes(settings, router, upstreams, select, engine.orchestrator, engine.learner)
    relayed = RelayService(router, relay, settings.timeouts.request, settings.secrets())
    native = NativeResponses(
        router, relayed, relay, settings.upstream_responses, settings.timeouts.request
    )
    return AppServices(
        settings=settings,
        router=router,
        modes=modes,
        responses=ResponsesService(
            modes, ResponseStore(redis, settings.responses), native, select.rewrite
        ),
        orchestrator=engine.orchestrator,
        relayed=relayed,
        models=ModelCatalog(router, relay, settings.upstream_model, created=int(time.time())),
        registry=registry,
        mcp_registry=mcp_registry,
        mcp_endpoint=endpoint,
        readiness=Readiness(
            _checks(settings, redis, session, engine.catalog, engine.mcp),
            {"catalog_sync": lambda: engine.catalog.sync},
        ),
        authenticator=authenticator,
        admin_key=_key_bytes(settings.admin_key),
        learner=engine.learner,
    )


def _redis(settings: Settings, stack: AsyncExitStack) -> Redis | None:
    """The Redis every store shares, when ``redis_url`` is set."""
    redis = Redis.from_url(settings.redis_url) if settings.redis_url else None
    if redis is not None:
        stack.push_async_callback(redis.aclose)
    return redis


async def _encoders(
    settings: Settings, stack: AsyncExitStack, redis: Redis | None, embeddings: LRUCache | None
) -> EncoderService:
    """The embedding model select mode and the catalog share."""
    encoders = EncoderService(settings.retriever, redis, embeddings)
    stack.callback(encoders.close)
    if settings.retriever.preload:
        await encoders.start()  # else on first use: passthrough never loads it
    return encoders


def _upstreams(
    settings: Settings, stack: AsyncExitStack
) -> tuple[aiohttp.ClientSession, RelayUpstream, Upstreams]:
    session = make_session(settings.timeouts)
    relay = RelayUpstream(session)
    upstreams = Upstreams(relay, LiteLLMUpstream(settings.timeouts.request))
    stack.push_async_callback(upstreams.litellm.aclose)
    stack.push_async_callback(upstreams.relay.aclose)  # closes the session
    return session, relay, upstreams


@dataclass(frozen=True, slots=True)
class _Engine:
    """What orchestrate mode runs on, and the tool sources it shares with the registries."""

    store: GraphStore | None  # opened here only for the registry or MCP
    kept: ServerList  # the MCP servers the registry added
    mcp: McpSources | None
    executor: ToolExecutor
    catalog: CatalogService
    orchestrator: Orchestrator
    learner: Learner


async def _engine(
    settings: Settings,
    stack: AsyncExitStack,
    redis: Redis | None,
    encoders: EncoderService,
    router: ModelRouter,
    upstreams: Upstreams,
) -> _Engine:
    store = None
    if settings.admin_key is not None or settings.mcp_servers:  # the registry's or MCP's
        store = open_store(settings.data_dir, settings.neo4j_uri)
    kept = open_server_list(settings.data_dir, redis)
    mcp = await _mcp_sources(settings, store, kept)
    executor = ToolExecutor(
        settings.executor,
        redis,
        mcp=mcp,
        databases=settings.packs.database,
        graphs=settings.packs.knowledge_graph,
    )
    stack.push_async_callback(executor.aclose)
    learner = open_learner(settings, redis)
    available = mcp.available if mcp else None
    catalog = CatalogService(settings, encoders, store, available, learner)
    stack.push_async_callback(catalog.aclose)
    stores = Stores.open(redis, settings.orchestrate)
    orchestrator = Orchestrator(settings, catalog, executor, router, upstreams, stores, learner)
    stack.push_async_callback(orchestrator.drain)
    return _Engine(store, kept, mcp, executor, catalog, orchestrator, learner)


def open_learner(settings: Settings, redis: Redis | None) -> Learner:
    """The learner over the shared Redis, else over an in-process store."""
    options = settings.learning
    store = open_learned_store(redis, options.max_entries, options.max_tenants)
    return Learner(store, options, settings.secrets())


async def _registries(
    settings: Settings,
    stack: AsyncExitStack,
    redis: Redis | None,
    engine: _Engine,
    notices: CatalogNotices,
) -> tuple[ToolRegistry | None, McpRegistry | None]:
    """The tool registry and the MCP one (admin key); the MCP sources started."""
    store, mcp = engine.store, engine.mcp
    registry = None
    if store is not None:
        documents = OpenApiFetcher(engine.executor.client, settings.limits.max_body_bytes)
        registry = ToolRegistry(
            store, engine.executor.invoker, on_change=notices.announce, fetch=documents.fetch
        )
    mcp_registry = None
    if mcp is not None:  # started once the catalog hears its changes; closed before the store
        mcp.on_change = notices.announce
        mcp.start()
        stack.push_async_callback(mcp.aclose)
        if registry is not None and store is not None:
            mcp_registry = await _mcp_registry(stack, settings, mcp, store, engine.kept, redis)
    return registry, mcp_registry


def _preload(settings: Settings, stack: AsyncExitStack, catalog: CatalogService) -> None:
    """The catalog's load in the background (``orchestrate.preload``), and the start-up
    line that says so."""
    if settings.orchestrate.preload:
        catalog.preload()
        stack.push_async_callback(catalog.settle)  # before the stores close under it
    log.info(startup_line(settings, _catalog_state(settings)))
    if (warning := open_proxy_warning(settings)) is not None:
        log.warning(warning)


async def _mcp_endpoint(
    settings: Settings, stack: AsyncExitStack, engine: _Engine, authenticator: Authenticator
) -> McpEndpoint:
    """``/mcp``: the catalog's tools and orchestrated requests for MCP clients."""
    endpoint = McpEndpoint(
        CatalogTools(engine.catalog, engine.executor),
        RequestTools(engine.orchestrator, settings),
        authenticator,
        settings.secrets(),
        settings.limits.max_body_bytes,
    )
    await stack.enter_async_context(endpoint.run())
    return endpoint


def _modes(
    settings: Settings,
    router: ModelRouter,
    upstreams: Upstreams,
    select: SelectService,
    orchestrator: Orchestrator,
    learner: Learner,
) -> Modes:
    """Chat completions' modes by name. Passthrough and select are one service,
    select's with the retriever's rewrite of ``tools`` in front."""

    def chat(rewrite: Rewrite | None = None, observe: ObserveTools | None = None) -> ChatService:
        timeout = settings.timeouts.request
        return ChatService(router, upstreams, timeout, settings.secrets(), rewrite, observe)

    learned = learner.observe_select if settings.learning.enabled else None
    services: dict[Mode, ChatMode] = {
        "passthrough": chat(),
        "select": chat(select.rewrite, learned),
        "orchestrate": orchestrator,
    }
    return Modes(services, settings.default_mode)


def _checks(
    settings: Settings,
    redis: Redis | None,
    session: aiohttp.ClientSession,
    catalog: CatalogService,
    mcp: McpSources | None,
) -> dict[str, Check]:
    """Readiness: every store that is configured, the catalog once it is loaded, and
    the MCP servers' first connection attempts (a server that is down does not take
    the process out of rotation: its tools are left out until it is back)."""
    checks: dict[str, Check] = {}
    if redis is not None:
        checks["redis"] = redis_check(redis)
    if settings.qdrant_url:
        checks["qdrant"] = http_check(session, f"{settings.qdrant_url}/readyz")
    if settings.neo4j_uri:
        checks["neo4j"] = neo4j_check(settings.neo4j_uri)
    checks["catalog"] = _catalog_check(catalog)
    if mcp is not None:
        checks["mcp"] = _mcp_check(mcp)
    return checks


async def _mcp_sources(
    settings: Settings, store: GraphStore | None, kept: ServerList
) -> McpSources | None:
    """The settings' MCP servers and those added through the registry API, when either
    can exist (servers can be added only with an admin key). Added servers that cannot
    be read now (Redis is down) are started when the notices are heard again."""
    if store is None or not (settings.mcp_servers or settings.admin_key):
        return None
    fixed = {server.name for server in settings.mcp_servers}
    try:
        added = [s for s in await kept.load() if s.name not in fixed]
        added = Permits.from_settings(settings).allowed(added, "the kept list")
    except StoreUnavailable as exc:
        log.warning("MCP servers added through the API are not started yet: %s", exc.message)
        added = []
    return McpSources(
        [*settings.mcp_servers, *added],
        settings.executor.call_timeout,
        store,
        policy=EgressPolicy.from_settings(settings.executor),
    )


async def _mcp_registry(
    stack: AsyncExitStack,
    settings: Settings,
    mcp: McpSources,
    store: GraphStore,
    kept: ServerList,
    redis: Redis | None,
) -> McpRegistry:
    """The registry API's MCP servers, following what other processes add and remove
    (through Redis's notices) while the app runs."""
    fixed = [server.name for server in settings.mcp_servers]
    permits = Permits.from_settings(settings)
    registry = McpRegistry(mcp, kept, fixed, store, permits=permits)
    notices = CatalogNotices(redis, registry.heard, channel=MCP_SERVERS_CHANNEL)
    registry.announce = notices.announce
    await stack.enter_async_context(_listening(notices))
    await stack.enter_async_context(_running(registry.follow()))
    return registry


def _mcp_check(mcp: McpSources) -> Check:
    async def check() -> None:
        if mcp.loading:
            raise Loading

    return check


def _catalog_check(catalog: CatalogService) -> Check:
    async def check() -> None:
        if catalog.loading:
            raise Loading
        await catalog.check()

    return check


def _catalog_state(settings: Settings) -> str:
    """The catalog's state at start-up, in words, for the start-up line."""
    if not settings.orchestrate.preload:
        return "and embedding model loaded on first use"
    if settings.orchestrate.builtin_tools:
        return (
            f"loading in the background ({len(builtin_tools())} built-in tools and any registered)"
        )
    return "loading in the background"


@contextlib.asynccontextmanager
async def _listening(notices: CatalogNotices) -> AsyncIterator[None]:
    """Catalog notices from other processes, listened to while the app runs."""
    listener = asyncio.create_task(notices.listen())
    try:
        yield
    finally:
        listener.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await listener


@contextlib.asynccontextmanager
async def _running(work: Coroutine[None, None, None]) -> AsyncIterator[None]:
    """``work`` as a task while the app runs, cancelled on the way out."""
    task = asyncio.create_task(work)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _key_bytes(key: SecretStr | None) -> bytes | None:
    return key.get_secret_value().encode() if key else None
