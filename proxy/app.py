"""``create_app``: wires settings, upstreams, routers and middleware together."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from redis.asyncio import Redis
from starlette.exceptions import HTTPException
from starlette.responses import Response

from graph_store.store import open_store
from proxy import health, metrics, models_router
from proxy.auth import authenticate
from proxy.chat.router import routes as chat_routes
from proxy.chat.service import ChatService
from proxy.config import Settings, load_settings
from proxy.errors import InvalidRequest, NotFound, ToolgraphError
from proxy.execute.service import ToolExecutor
from proxy.middleware import ObservabilityMiddleware
from proxy.orchestrate import router as orchestrate_router
from proxy.orchestrate.catalog import CatalogService
from proxy.orchestrate.notices import CatalogNotices
from proxy.orchestrate.records import Stores
from proxy.orchestrate.service import Orchestrator
from proxy.registry import router as registry_router
from proxy.registry.service import ToolRegistry
from proxy.responses import error_response
from proxy.select.service import SelectService
from proxy.upstream import ModelRouter, Upstreams
from proxy.upstream.relay import RelayUpstream, make_session
from proxy.upstream.translated import LiteLLMUpstream, load_litellm

log = logging.getLogger(__name__)


def create_app(settings: Settings) -> FastAPI:
    app = FastAPI(
        title="toolgraph",
        lifespan=_lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.settings = settings
    master_key = settings.master_key
    app.state.master_key = master_key.get_secret_value().encode() if master_key else None
    admin_key = settings.admin_key
    app.state.admin_key = admin_key.get_secret_value().encode() if admin_key else None
    app.state.router = ModelRouter(settings)
    app.state.started_at = int(time.time())
    app.router.routes.extend(chat_routes)
    app.include_router(models_router.router, dependencies=[Depends(authenticate)])
    app.include_router(health.router)
    app.include_router(registry_router.router)
    app.include_router(orchestrate_router.router)
    _add_error_handlers(app, settings.secrets())
    app.add_middleware(ObservabilityMiddleware, secrets=settings.secrets())
    return app


def create_app_from_environment() -> FastAPI:
    """The factory uvicorn's workers call: settings from ``TOOLGRAPH_*`` and the file."""
    return create_app(load_settings())


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    router: ModelRouter = app.state.router
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    if router.has_litellm_routes():
        load_litellm()  # seconds of import, paid before the first request rather than in it
    session = make_session(settings.timeouts)
    upstreams = Upstreams(RelayUpstream(session), LiteLLMUpstream(settings.timeouts.request))
    redis = Redis.from_url(settings.redis_url) if settings.redis_url else None
    select = SelectService(settings.retriever, redis)
    if settings.retriever.preload:
        await select.start()  # else on the first select request: passthrough never loads it
    app.state.chat = ChatService(
        router,
        upstreams,
        settings.limits,
        settings.timeouts.request,
        settings.secrets(),
        select=select,
        default_mode=settings.default_mode,
    )
    checks: dict[str, health.Check] = {}
    if redis is not None:
        checks["redis"] = health.redis_check(redis)
    if settings.qdrant_url:
        checks["qdrant"] = health.http_check(session, f"{settings.qdrant_url}/readyz")
    if settings.neo4j_uri:
        checks["neo4j"] = health.neo4j_check(settings.neo4j_uri)
    executor = ToolExecutor(settings.executor, redis)
    store = open_store(settings) if settings.admin_key is not None else None
    catalog = CatalogService(settings, select, store)
    checks["catalog"] = catalog.check
    app.state.readiness = health.Readiness(checks)
    app.state.orchestrator = orchestrator = Orchestrator(
        settings,
        catalog,
        executor,
        router,
        upstreams,
        Stores.open(redis, settings.orchestrate),
    )
    notices = CatalogNotices(redis, catalog.changed)
    if store is not None:
        app.state.registry = ToolRegistry(store, executor.invoker, on_change=notices.announce)
    listener = asyncio.create_task(notices.listen())
    try:
        if settings.orchestrate.preload:
            await catalog.get()
        yield
    finally:
        listener.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await listener
        await orchestrator.drain()
        await executor.aclose()
        catalog.close()
        await upstreams.relay.aclose()
        await upstreams.litellm.aclose()
        select.close()
        if redis is not None:
            await redis.aclose()
        metrics.forget_process(os.getpid())


def _add_error_handlers(app: FastAPI, secrets: list[str]) -> None:
    async def on_toolgraph_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ToolgraphError)
        return error_response(exc, secrets)

    async def on_validation_error(request: Request, exc: Exception) -> Response:
        return error_response(InvalidRequest(str(exc)), secrets)

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 404:
            error: ToolgraphError = NotFound(
                f"Unknown request URL: {request.method} {request.url.path}.",
                code="unknown_url",
            )
        else:
            error = ToolgraphError(
                str(exc.detail), status=exc.status_code, type="invalid_request_error"
            )
        return error_response(error, secrets)

    app.add_exception_handler(ToolgraphError, on_toolgraph_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(HTTPException, on_http_error)
