"""The outer layers: request id, timing headers, metrics, the access log line; and
the ``/v1`` routes served without their prefix.

A plain ASGI middleware rather than Starlette's ``BaseHTTPMiddleware``, which would
buffer each streamed chunk through an extra task and queue.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from starlette.routing import Match, Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from proxy import metrics
from proxy.context import RequestContext
from proxy.errors import InternalError, redact_headers

log = logging.getLogger(__name__)

_PROBES = frozenset({"/healthz", "/readyz", "/metrics"})
_API = frozenset(
    {
        "/v1/chat/completions",
        "/v1/responses",
        "/v1/completions",
        "/v1/embeddings",
        "/v1/moderations",
        "/v1/models",
    }
)  # Other paths share one label so a scanner cannot blow up the series count.


def route_label(path: str) -> str:
    """The route's metrics label; a route served without ``/v1`` counts as the one with."""
    if path in _PROBES:
        return path
    api = path if path.startswith("/v1/") else f"/v1{path}"
    if api in _API:
        return api
    if api.startswith("/v1/models/"):
        return "/v1/models/{model}"
    return "other"


class ObservabilityMiddleware:
    """Also the one place response headers pass: any of ``secrets`` an upstream echoed
    in one it forwards (``x-ratelimit-*``, ``retry-after``, …) is masked here."""

    def __init__(self, app: ASGIApp, secrets: Sequence[str] = ()) -> None:
        self.app = app
        self.secrets = tuple(secrets)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        context = RequestContext.start(_header(scope, b"x-request-id"))
        scope.setdefault("state", {})["context"] = context
        route = route_label(scope["path"])
        status = 500
        overhead = 0.0
        started = False

        async def send_with_headers(message: Message) -> None:
            nonlocal status, overhead, started
            if message["type"] == "http.response.start":
                started = True
                status = message["status"]
                overhead = context.overhead()
                headers = redact_headers(message.get("headers", ()), self.secrets)
                headers.append((b"x-request-id", context.request_id.encode()))
                headers.append((b"x-toolgraph-overhead-ms", f"{overhead * 1000:.3f}".encode()))
                message["headers"] = headers
                if context.mode != "none":
                    metrics.PROXY_OVERHEAD.labels(context.mode).observe(overhead)
            await send(message)

        in_flight = metrics.IN_FLIGHT.labels(route)
        in_flight.inc()
        try:
            await self.app(scope, receive, send_with_headers)
        except Exception:  # the outermost edge: log it, answer 500, never a stack trace
            log.exception("unhandled error")
            if not started:
                error = InternalError("toolgraph failed to answer; its logs say why")
                await send_with_headers(
                    {
                        "type": "http.response.start",
                        "status": error.status,
                        "headers": [(b"content-type", b"application/json")],
                    }
                )
                await send_with_headers({"type": "http.response.body", "body": error.to_json()})
        finally:
            in_flight.dec()
            await _finish(context)
            elapsed = context.elapsed()
            labels = (route, context.mode, str(status))
            metrics.REQUESTS.labels(*labels).inc()
            metrics.REQUEST_LATENCY.labels(*labels).observe(elapsed)
            log.info(
                "%s %s %s %.1fms overhead=%.2fms",
                scope["method"],
                scope["path"],
                status,
                elapsed * 1000,
                overhead * 1000,
            )


async def _finish(context: RequestContext) -> None:
    """What the request owes when it has ended: its key's running count, given back."""
    for release in context.on_finish:
        try:
            await release()
        except Exception:  # the outermost edge: a failed release is logged, never raised
            log.exception("could not give back a key's running count")


class UnprefixedPaths:
    """Every ``/v1/…`` route served without its prefix too (``POST /chat/completions``),
    as LiteLLM's proxy serves them, so a client whose ``base_url`` lacks ``/v1`` finds
    them: a path the app would route with the prefix is given it. The routes are
    defined once, the routing table read as it is; paths under ``/v1`` pass untouched."""

    def __init__(self, app: ASGIApp, router: Router) -> None:
        self.app = app
        self.router = router

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope["path"].startswith("/v1/"):
            prefixed = {**scope, "path": f"/v1{scope['path']}"}
            if any(route.matches(prefixed)[0] != Match.NONE for route in self.router.routes):
                if "raw_path" in scope:
                    prefixed["raw_path"] = b"/v1" + scope["raw_path"]
                scope = prefixed
        await self.app(scope, receive, send)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None
