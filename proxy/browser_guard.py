"""What a web page could make a browser do to a proxy on the user's own machine.

A proxy without a master key (``make run``'s default) answers anyone who reaches it,
and a page the user visits reaches ``127.0.0.1`` through their browser. It cannot
read the answers of a cross-site request, but the work happens (tools run, the
upstream is spent), and with DNS rebinding (a name of the page's own that turns
into ``127.0.0.1``) its requests become same-origin and it reads them too.
:class:`BrowserGuard` refuses both, before any route runs:

* a ``Host`` that is not one of :func:`allowed_hosts` (rebinding keeps the page's
  own name there): the setting ``allowed_hosts``, or the loopback names when the
  proxy listens on loopback without a key;
* without a master key, a cross-site request: an ``Origin`` that is neither the
  proxy's own nor one of ``allowed_origins``, or (where a browser sends no
  ``Origin``) ``Sec-Fetch-Site: cross-site``/``same-site``; a top-level ``GET``
  navigation passes (its page cannot read the answer, and a link to ``/ui`` works);
* without a master key, a body (``POST``) that is not declared JSON: ``text/plain``
  and forms are what a page may send cross-site without asking first (a CORS
  "simple request"), and toolgraph's API reads JSON only.

With a master key a page cannot authenticate, so only an explicit
``allowed_hosts`` applies. The console (``/ui``) is same-origin and sends JSON, so it
passes.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from proxy.config import Settings
from proxy.errors import Forbidden, ToolgraphError, UnsupportedMediaType
from proxy.http_responses import error_response

log = logging.getLogger(__name__)

#: The names a loopback-bound proxy answers to by default.
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_FOREIGN_SITES = frozenset({"cross-site", "same-site"})


def listens_on_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_hosts(settings: Settings) -> frozenset[str] | None:
    """The ``Host`` names the proxy answers to; ``None``: any."""
    if settings.allowed_hosts is not None:
        return frozenset(_host_name(name) for name in settings.allowed_hosts)
    if settings.master_key is None and listens_on_loopback(settings.host):
        return LOOPBACK_NAMES
    return None


def open_proxy_warning(settings: Settings) -> str | None:
    """The start-up warning of a proxy that runs without a key; ``None`` with one."""
    if settings.master_key is not None:
        return None
    hosts = allowed_hosts(settings)
    names = ", ".join(sorted(hosts)) if hosts is not None else "any host"
    return (
        "toolgraph runs WITHOUT a master key: anyone who reaches "
        f"{settings.host}:{settings.port} can run its tools and spend its upstream. "
        f"Set master_key (TOOLGRAPH_MASTER_KEY) unless this is your own machine. Answering "
        f"Host {names}; cross-site browser requests and non-JSON bodies are refused."
    )


class BrowserGuard:
    """ASGI middleware: the checks of this module's docstring, answered in OpenAI's
    error shape."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self._hosts = allowed_hosts(settings)
        self._open = settings.master_key is None
        self._origins = frozenset(origin.rstrip("/").lower() for origin in settings.allowed_origins)
        self._secrets = settings.secrets()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            problem = self.refusal(scope["method"], Headers(scope=scope))
            if problem is not None:
                log.warning("refused %s %s: %s", scope["method"], scope["path"], problem.message)
                await error_response(problem, self._secrets)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def refusal(self, method: str, headers: Headers) -> ToolgraphError | None:
        host = headers.get("host", "")
        if self._hosts is not None and _host_name(host) not in self._hosts:
            return Forbidden(
                f"Host {host!r} is not a name this proxy answers to (allowed_hosts: "
                f"{', '.join(sorted(self._hosts))}); a page that points its own name at "
                "this address is refused",
                code="host_not_allowed",
            )
        if not self._open:
            return None
        if _cross_site(method, headers, host, self._origins):
            return Forbidden(
                "a cross-site request from a web page to a proxy without a master key is "
                "refused; add its origin to allowed_origins, or set master_key",
                code="cross_site_request",
            )
        if _has_body(method, headers) and not _is_json(headers.get("content-type", "")):
            return UnsupportedMediaType(
                "the body must be JSON, sent as 'Content-Type: application/json' (a proxy "
                "without a master key reads no other type)",
                param="content-type",
            )
        return None


def _cross_site(method: str, headers: Headers, host: str, allowed: Iterable[str]) -> bool:
    origin = headers.get("origin")
    if origin is not None:
        origin = origin.rstrip("/").lower()
        return urlsplit(origin).netloc != host.lower() and origin not in allowed
    if headers.get("sec-fetch-site") not in _FOREIGN_SITES:
        return False  # not a browser, the user's own navigation, or same-origin
    navigation = headers.get("sec-fetch-mode") == "navigate" and method in ("GET", "HEAD")
    return not navigation


def _has_body(method: str, headers: Headers) -> bool:
    """Whether a request sends a body (a bodyless POST, ``sync``, has nothing to read)."""
    if method not in _BODY_METHODS:
        return False
    return headers.get("content-length", "0") != "0" or "transfer-encoding" in headers


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def _host_name(host: str) -> str:
    """The name of a ``Host`` header (or a setting): no port, no brackets, lower case."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    if host.count(":") == 1:
        host = host.split(":", 1)[0]
    return host.rstrip(".")
