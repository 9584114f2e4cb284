"""The transport of one configured server, watched: stdio or streamable HTTP.

The SDK's client says nothing when a stdio server dies between calls: its receive
loop ends and later requests fail. :class:`WatchedTransport` wraps the read stream so
that its end sets an event the connection's supervisor waits on, and a dead server is
noticed (and its tools marked unavailable) at once rather than by the next call.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import sys
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import Self, TextIO

import anyio
import httpcore2
import httpx2
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from proxy.config import McpServerSettings
from proxy.execute.egress import EgressPolicy, GuardedBackend

Message = SessionMessage | Exception


class WatchedStream:
    """The transport's read stream; ``on_end`` is called once when it ends."""

    def __init__(self, inner: anyio.abc.ObjectReceiveStream[Message], on_end: Callable[[], None]):
        self._inner = inner
        self._on_end = on_end

    async def receive(self) -> Message:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise

    async def aclose(self) -> None:
        self._on_end()
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Message:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class WatchedTransport:
    """A transport for ``server`` whose end sets :attr:`ended`."""

    def __init__(
        self,
        server: McpServerSettings,
        connect_timeout: float,
        policy: EgressPolicy,
        *,
        errlog: TextIO | None = None,
    ) -> None:
        self.server = server
        self.ended = asyncio.Event()
        self._connect_timeout = connect_timeout
        self._policy = policy
        self._errlog = errlog  # a stdio server's stderr, read by the caller; else ours
        #: The HTTP error statuses an HTTP server answered (the SDK keeps only a message).
        self.error_statuses: list[int] = []

    @contextlib.asynccontextmanager
    async def open(self) -> AsyncIterator[tuple[WatchedStream, object]]:
        async with self._streams() as (read, write):
            yield WatchedStream(read, self.ended.set), write

    @contextlib.asynccontextmanager
    async def _streams(
        self,
    ) -> AsyncIterator[tuple[anyio.abc.ObjectReceiveStream[Message], object]]:
        server = self.server
        if server.url is None:
            params = StdioServerParameters(
                command=server.command[0],
                args=server.command[1:],
                env=server.env or None,
                cwd=server.cwd,
            )
            async with stdio_client(params, errlog=self._errlog or sys.stderr) as streams:
                yield streams  # type: ignore[misc]
            return
        async with (
            guarded_client(
                self._policy,
                server.header_values(),
                self._connect_timeout,
                error_statuses=self.error_statuses,
            ) as client,
            streamable_http_client(server.url, http_client=client) as streams,
        ):
            yield streams  # type: ignore[misc]


def guarded_client(
    policy: EgressPolicy,
    headers: dict[str, str],
    connect_timeout: float,
    *,
    error_statuses: list[int] | None = None,
) -> httpx2.AsyncClient:
    """The HTTP client of one HTTP MCP server, under the tools' egress policy: the host
    allow-list on every request (redirects too), every address checked when connecting.
    Each status of 400 and above is appended to ``error_statuses``, when given."""

    async def check_hop(request: httpx2.Request) -> None:
        policy.check_host(request.url.host)

    async def note_status(response: httpx2.Response) -> None:
        if error_statuses is not None and response.status_code >= 400:
            error_statuses.append(response.status_code)

    transport = httpx2.AsyncHTTPTransport(trust_env=False, retries=0)
    # httpx2 takes no network backend; its pool does (as for HTTP tools).
    transport._pool = httpcore2.AsyncConnectionPool(
        ssl_context=ssl.create_default_context(),
        network_backend=GuardedBackend(  # type: ignore[arg-type]  # httpcore's, not httpcore2's
            policy, httpcore2.AnyIOBackend(), (httpcore2.ConnectError, httpcore2.ConnectTimeout)
        ),
    )
    return httpx2.AsyncClient(
        transport=transport,
        trust_env=False,
        headers=headers,
        timeout=httpx2.Timeout(connect_timeout, read=None),
        event_hooks={"request": [check_hop], "response": [note_status]},
    )
