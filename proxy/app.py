"""``create_app``: wires the settings, the services, the routers and the middleware."""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response

from proxy import health, models_router, openapi
from proxy.auth import authenticate
from proxy.browser_guard import BrowserGuard
from proxy.chat.router import routes as chat_routes
from proxy.config import Settings, load_settings
from proxy.console import router as console_router
from proxy.errors import InvalidRequest, NotFound, ToolgraphError
from proxy.http_responses import error_response
from proxy.learning import router as learning_router
from proxy.logs import configure_logging
from proxy.mcp import router as mcp_registry_router
from proxy.mcp_server.router import route as mcp_route
from proxy.middleware import ObservabilityMiddleware, UnprefixedPaths
from proxy.orchestrate import router as orchestrate_router
from proxy.registry import router as registry_router
from proxy.relayed.router import routes as relayed_routes
from proxy.responses_api.router import routes as responses_routes
from proxy.services import AppServices, open_services
from proxy.tenancy import router as keys_router

log = logging.getLogger(__name__)


def create_app(settings: Settings, services: AppServices | None = None) -> FastAPI:
    """The app; its lifespan opens the services from ``settings`` and closes them, unless
    the caller passes ``services`` it opened itself (in the loop the app will run in)."""
    app = FastAPI(
        title="toolgraph",
        lifespan=_lifespan(settings) if services is None else None,
        docs_url="/docs",
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    if services is not None:
        app.state.services = services
    app.router.routes.extend(chat_routes)
    app.router.routes.extend(responses_routes)
    app.router.routes.extend(relayed_routes)
    app.include_router(models_router.router, dependencies=[Depends(authenticate)])
    app.include_router(health.router)
    app.include_router(registry_router.router)
    app.include_router(mcp_registry_router.router)
    app.include_router(orchestrate_router.router)
    app.include_router(keys_router.router)
    app.include_router(learning_router.router)
    app.include_router(console_router.router)
    app.router.routes.extend(console_router.pages)
    app.router.routes.append(mcp_route)
    openapi.install(app)
    _add_error_handlers(app, settings.secrets())
    app.add_middleware(UnprefixedPaths, router=app.router)
    app.add_middleware(BrowserGuard, settings=settings)
    app.add_middleware(ObservabilityMiddleware, secrets=settings.secrets())
    return app


def create_app_from_environment() -> FastAPI:
    """The factory uvicorn's workers call: settings from ``TOOLGRAPH_*`` and the file.
    Each worker is a new process, so it sets up its own log."""
    settings = load_settings()
    configure_logging(settings.log_level)
    return create_app(settings)


def _lifespan(settings: Settings) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            app.state.services = await open_services(settings, stack)
            # What start-up made (modules, models, settings) lives as long as the
            # process: moved out of the collector's reach, a full collection walks only
            # what requests made (it walked 115k start-up objects each time).
            gc.collect()
            gc.freeze()
            yield

    return lifespan


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
