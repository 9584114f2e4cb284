"""Calling a tool: HTTP endpoints and in-process Python tools behind one interface.

:class:`Invoker` picks the way from the tool's endpoint: ``http(s)://…`` goes through
:class:`HttpInvoker` (one shared httpx client per catalog, under an
:class:`~proxy.execute.egress.EgressPolicy`), ``builtin:<name>`` through
:class:`~proxy.tools.builtin.PythonTools`, ``mcp://<server>/<tool>`` through the
MCP server's session (:class:`~proxy.mcp.sources.McpSources`). httpx's exceptions are translated to
:mod:`proxy.errors` here and nowhere else. Credentials come from the settings and
are added to the request at the last moment: they are never in the arguments an LLM
wrote, in the output, or in an error message, nor sent on by a redirect to another
origin (a hop's host passes the egress policy again, and loses the credential's header;
httpx drops only ``Authorization``). A fixed query string in an endpoint's URL
(``?api-version=…``) is kept beside the arguments' query.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

import httpcore
import httpx
from pydantic import JsonValue

from graph_store.ingest.mcp import SCHEME as MCP_SCHEME
from graph_store.models import ParamLocation, Tool
from proxy.config import ExecutorSettings, ToolCredentialSettings
from proxy.errors import (
    ToolError,
    ToolHttpStatus,
    ToolInputRejected,
    ToolResponseTooLarge,
    ToolTimeout,
    ToolUnavailable,
    redact,
)
from proxy.execute.egress import EgressPolicy, GuardedBackend
from proxy.tools.builtin import BUILTIN_SCHEME, PythonTools

log = logging.getLogger(__name__)

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
_MAX_RETRY_AFTER = 5.0
_ERROR_SNIPPET = 300
_PLACEHOLDER = re.compile(r"\{([^{}/]+)\}")
#: A request's extension: the origin its credential headers are for, and their names.
_CREDENTIAL_HEADERS = "toolgraph.credential_headers"


class ToolInvoker(Protocol):
    async def invoke(self, tool: Tool, arguments: Mapping[str, JsonValue]) -> JsonValue:
        """Call ``tool`` with ``arguments``; raise a :class:`proxy.errors.ToolError`."""
        ...


def tool_host(tool: Tool) -> str:
    """The host a tool's calls go to, ``local`` for in-process tools, ``mcp:<server>``
    for an MCP server's."""
    url = tool.endpoint.url if tool.endpoint else ""
    if url.startswith(("http://", "https://")):
        return (urlsplit(url).hostname or "").lower()
    if url.startswith(MCP_SCHEME):
        return "mcp:" + urlsplit(url).netloc
    return "local"


def make_http_client(policy: EgressPolicy, executor: ExecutorSettings) -> httpx.AsyncClient:
    """The one client a catalog's HTTP tools share; every hop and address policed."""

    async def check_hop(request: httpx.Request) -> None:
        policy.check_host(request.url.host)
        _drop_foreign_credentials(request)

    transport = httpx.AsyncHTTPTransport(trust_env=False, retries=0)
    # httpx takes no network backend; its pool does. Rebuilt with the same limits.
    transport._pool = _guarded_pool(policy, executor)
    return httpx.AsyncClient(
        transport=transport,
        trust_env=False,
        follow_redirects=True,
        max_redirects=5,
        timeout=httpx.Timeout(executor.call_timeout, connect=min(10.0, executor.call_timeout)),
        event_hooks={"request": [check_hop]},
    )


def _drop_foreign_credentials(request: httpx.Request) -> None:
    """A redirect hop to another origin than the credentials' loses their headers."""
    held = request.extensions.get(_CREDENTIAL_HEADERS)
    if held is None:
        return
    origin, names = held
    if _origin(request.url) != origin:
        for name in names:
            request.headers.pop(name, None)


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return url.scheme, url.host, url.port


def _guarded_pool(policy: EgressPolicy, executor: ExecutorSettings) -> httpcore.AsyncConnectionPool:
    return httpcore.AsyncConnectionPool(
        ssl_context=ssl.create_default_context(),
        max_connections=executor.max_concurrency,
        max_keepalive_connections=executor.max_concurrency,
        keepalive_expiry=30.0,
        network_backend=GuardedBackend(policy),
    )


@dataclass(frozen=True, slots=True)
class HttpRequest:
    method: str
    url: str
    params: dict[str, str]
    headers: dict[str, str]
    body: dict[str, JsonValue] | None
    credential_headers: tuple[str, ...] = ()  # the headers that carry a credential


class HttpInvoker:
    """HTTP tools: requests built from the Tool's endpoint, retried when that is safe."""

    def __init__(self, client: httpx.AsyncClient, executor: ExecutorSettings) -> None:
        self._client = client
        self._credentials = list(executor.credentials)
        self._retries = executor.retries
        self._backoff = executor.retry_backoff
        self._max_bytes = executor.max_response_bytes

    @property
    def secrets(self) -> list[str]:
        return [value for cred in self._credentials if (value := cred.value())]

    async def invoke(self, tool: Tool, arguments: Mapping[str, JsonValue]) -> JsonValue:
        request = build_request(tool, arguments)
        request = self._with_credentials(tool, request)
        attempts = 1 + (self._retries if request.method in IDEMPOTENT_METHODS else 0)
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                status, headers, content = await self._send(request)
            except httpx.TransportError as exc:
                if last or isinstance(exc, httpx.TimeoutException):
                    raise self._translate(tool, exc) from None
                await asyncio.sleep(self._backoff * 2**attempt)
                continue
            if status in RETRY_STATUSES and not last:
                await asyncio.sleep(_retry_delay(headers, self._backoff * 2**attempt))
                continue
            if status >= 400:
                snippet = redact(content[:_ERROR_SNIPPET].decode(errors="replace"), self.secrets)
                raise ToolHttpStatus(
                    status, f"{tool.name} answered HTTP {status}: {snippet}", param=tool.name
                )
            return parse_body(scrub(content, self.secrets), headers.get("content-type", ""))
        raise AssertionError("unreachable")

    async def _send(self, request: HttpRequest) -> tuple[int, httpx.Headers, bytes]:
        async with self._client.stream(
            request.method,
            request.url,
            params=request.params,
            headers=request.headers,
            json=request.body,
            extensions=self._credential_extension(request),
        ) as response:
            chunks, size = [], 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > self._max_bytes:
                    raise ToolResponseTooLarge(
                        f"the response passed {self._max_bytes} bytes", param=request.url
                    )
                chunks.append(chunk)
            return response.status_code, response.headers, b"".join(chunks)

    @staticmethod
    def _credential_extension(request: HttpRequest) -> dict[str, object]:
        if not request.credential_headers:
            return {}
        origin = _origin(httpx.URL(request.url))
        return {_CREDENTIAL_HEADERS: (origin, request.credential_headers)}

    def _with_credentials(self, tool: Tool, request: HttpRequest) -> HttpRequest:
        host = tool_host(tool)
        matching = [cred for cred in self._credentials if cred.host.lower() == host]
        if not matching:
            return request
        params, headers = dict(request.params), dict(request.headers)
        for cred in matching:
            value = _credential_value(cred, tool)
            if cred.header is not None:
                headers[cred.header] = cred.prefix + value
            elif cred.query is not None:
                params[cred.query] = cred.prefix + value
        named = tuple(cred.header for cred in matching if cred.header is not None)
        return HttpRequest(request.method, request.url, params, headers, request.body, named)

    def _translate(self, tool: Tool, exc: httpx.TransportError) -> ToolError:
        if isinstance(exc, httpx.TimeoutException):
            return ToolTimeout(f"{tool.name} did not answer in time", param=tool.name)
        return ToolUnavailable(f"cannot reach {tool.name}: {type(exc).__name__}", param=tool.name)


def _credential_value(cred: ToolCredentialSettings, tool: Tool) -> str:
    value = cred.value()
    if value is None:
        raise ToolUnavailable(
            f"the credential for {cred.host} ({cred.env}) is not set", param=tool.name
        )
    return value


def build_request(tool: Tool, arguments: Mapping[str, JsonValue]) -> HttpRequest:
    """Place each argument where the endpoint says: path, query, header, cookie or body."""
    endpoint = tool.endpoint
    if endpoint is None or not endpoint.url.startswith(("http://", "https://")):
        raise ToolUnavailable(f"{tool.name} has no HTTP endpoint", param=tool.name)
    method = endpoint.method.upper()
    parts = urlsplit(endpoint.url)
    if "{" in parts.netloc:
        raise ToolError(f"{tool.name}: the host of its URL may not be a parameter")
    # httpx replaces a URL's query with ``params``: the fixed one goes in params first
    fixed = dict(parse_qsl(parts.query, keep_blank_values=True))
    template = urlunsplit(parts._replace(query=""))
    url, params, headers, cookies = template, fixed, {}, {}
    body: dict[str, JsonValue] = {}
    for name, value in arguments.items():
        where = endpoint.locations.get(name) or _default_location(name, template, method)
        if where is ParamLocation.PATH:
            url = url.replace("{" + name + "}", _path_segment(tool, name, value))
        elif where is ParamLocation.QUERY:
            params[name] = _text(value)
        elif where is ParamLocation.HEADER:
            headers[name] = _text(value)
        elif where is ParamLocation.COOKIE:
            cookies[name] = _text(value)
        else:
            body[name] = value
    missing = _PLACEHOLDER.findall(urlsplit(url).path)
    if missing:
        names = ", ".join(missing)
        raise ToolInputRejected(f"{tool.name}: path parameters missing: {names}", param=tool.name)
    if cookies:
        headers["cookie"] = "; ".join(f"{k}={quote(v)}" for k, v in cookies.items())
    return HttpRequest(method, url, params, headers, body or None)


def _default_location(name: str, template: str, method: str) -> ParamLocation:
    if "{" + name + "}" in template:
        return ParamLocation.PATH
    return ParamLocation.QUERY if method in {"GET", "HEAD", "DELETE"} else ParamLocation.BODY


def _path_segment(tool: Tool, name: str, value: JsonValue) -> str:
    text = _text(value)
    if text in {"", ".", ".."}:
        raise ToolInputRejected(f"{tool.name}: path parameter {name} may not be {text!r}")
    return quote(text, safe="")


def _text(value: JsonValue) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"))


def _retry_delay(headers: httpx.Headers, backoff: float) -> float:
    try:
        return min(_MAX_RETRY_AFTER, max(backoff, float(headers.get("retry-after", ""))))
    except ValueError:
        return backoff


def parse_body(content: bytes, content_type: str) -> JsonValue:
    """JSON when it parses as JSON, the text otherwise."""
    text = content.decode(errors="replace")
    if "json" in content_type or text.lstrip()[:1] in ("{", "["):
        try:
            parsed: JsonValue = json.loads(text)
            return parsed
        except json.JSONDecodeError:
            pass
    return text


def scrub(content: bytes, secrets: Sequence[str]) -> bytes:
    """``content`` with every credential masked: a tool that echoes its key back must
    not hand it to an LLM, a trace or the client."""
    for secret in secrets:
        if secret:
            content = content.replace(secret.encode(), b"***")
    return content


class Invoker:
    """Every tool of a catalog, whichever way it is called."""

    def __init__(
        self, http: HttpInvoker | None, python: PythonTools, mcp: ToolInvoker | None = None
    ) -> None:
        self._http = http
        self._python = python
        self._mcp = mcp

    async def invoke(self, tool: Tool, arguments: Mapping[str, JsonValue]) -> JsonValue:
        url = tool.endpoint.url if tool.endpoint else ""
        if url.startswith(BUILTIN_SCHEME) or (not url and tool.name in self._python.functions):
            return await self._python.invoke(tool, arguments)
        if url.startswith(MCP_SCHEME):
            if self._mcp is None:
                raise ToolUnavailable(f"{tool.name}: no MCP server is configured", param=tool.name)
            return await self._mcp.invoke(tool, arguments)
        if self._http is None:
            raise ToolUnavailable(f"{tool.name}: HTTP tools are not enabled", param=tool.name)
        return await self._http.invoke(tool, arguments)


def hosts_of(tools: Sequence[Tool]) -> list[str]:
    return sorted({tool_host(tool) for tool in tools})
