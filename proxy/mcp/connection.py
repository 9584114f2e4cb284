"""One MCP server's session, kept open for every request and restarted when it dies.

A supervisor task owns the session (the SDK's context managers must be entered and
left by one task): it starts the server, runs ``initialize`` and ``tools/list`` (every
page) within ``connect_timeout``, hands the listing to ``on_tools``, then waits.
``notifications/tools/list_changed`` lists again; the end of the transport (a stdio
server that exits) or a call that finds the connection closed ends the session,
``on_tools`` hears ``None`` (the tools are unavailable, not gone) and the supervisor
starts the server again after a back-off that doubles up to :data:`MAX_BACKOFF`.

Calls from any request's task share the session (the SDK matches answers to
requests by id); a call's progress notifications go to the request's reporter
(:mod:`proxy.execute.progress`), when it set one. Each call has a timeout; a call
cancelled by its request (a deadline, a client that left) is cancelled at the server
too, by the SDK. The SDK's errors are
translated to :mod:`proxy.errors` here and nowhere else.

The connection speaks the initialize-handshake protocol (``mode="legacy"``), which
every server of 2025 and this SDK's own servers speak, and turns the SDK's response
cache off: a listing is wanted fresh when the server says it changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack

import anyio
import httpx2
from mcp import Client, MCPError, types
from mcp.shared.dispatcher import ProgressFnT
from mcp_types import CONNECTION_CLOSED
from pydantic import JsonValue, ValidationError

from proxy.config import McpServerSettings
from proxy.errors import EgressDenied, ToolError, ToolTimeout, ToolUnavailable
from proxy.execute.egress import EgressPolicy
from proxy.execute.progress import progress_line, reporter
from proxy.mcp.results import tool_output
from proxy.mcp.transport import WatchedTransport

log = logging.getLogger(__name__)

#: Seconds before the first restart of a server that failed; doubles up to the max.
FIRST_BACKOFF = 0.5
MAX_BACKOFF = 30.0
#: Pages of ``tools/list`` read at most: a server whose cursor never ends cannot hang a sync.
MAX_PAGES = 1000

#: Told a server's whole listing (JSON, as sent) when it is read, None when it goes away.
OnTools = Callable[[str, list[JsonValue] | None], Awaitable[None]]

# What the SDK raises when a request cannot be completed: an error answer, a closed
# or broken connection, an answer that is not MCP, an output that fails its schema.
_SDK_ERRORS = (
    MCPError,
    ValidationError,
    RuntimeError,
    OSError,
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    httpx2.HTTPError,
)


class McpConnection:
    def __init__(
        self,
        server: McpServerSettings,
        call_timeout: float,
        on_tools: OnTools,
        policy: EgressPolicy,
    ) -> None:
        self.server = server
        self._policy = policy
        self._call_timeout = server.call_timeout or call_timeout
        self._on_tools = on_tools
        self._client: Client | None = None
        self._wake = asyncio.Event()
        self._relist = False
        self._lost = False
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        # The session's scope, with the connect deadline until it is connected: anyio's,
        # which the SDK's shielded stop of a stdio server (its 2 s of grace, then the kill)
        # holds off; task.cancel() and asyncio.timeout cut that stop short and left the
        # process running.
        self._session: anyio.CancelScope | None = None
        self.tried = asyncio.Event()  # the first connection attempt ended, either way
        self.failure: str | None = None  # why the last attempt failed, in words

    @property
    def name(self) -> str:
        return self.server.name

    @property
    def connected(self) -> bool:
        return self._client is not None

    def start(self) -> None:
        self._task = asyncio.create_task(self._supervise(), name=f"mcp:{self.name}")

    async def aclose(self) -> None:
        self._closing = True
        self._wake.set()
        task = self._task
        if task is None:
            return
        if self._client is None and self._session is not None:
            self._session.cancel()  # still starting: no need to wait out connect_timeout
        await asyncio.wait([task])  # a cancel of aclose itself still reaches its caller
        if not task.cancelled():
            task.result()  # a bug in the supervisor is raised, never lost

    async def call(self, tool: str, arguments: Mapping[str, JsonValue]) -> JsonValue:
        """``tools/call``; the output, or a :class:`ToolError`."""
        client = self._client
        label = f"{self.name}/{tool}"
        if client is None:
            raise ToolUnavailable(f"MCP server {self.name} is not connected", param=label)
        try:
            async with asyncio.timeout(self._call_timeout):
                result = await client.call_tool(
                    tool, dict(arguments), progress_callback=_progress_to(label)
                )
        except TimeoutError:
            raise ToolTimeout(f"{label} did not answer in time", param=label) from None
        except _SDK_ERRORS as exc:
            raise self._translate(label, exc) from None
        return tool_output(label, result)

    async def list_now(self) -> list[JsonValue]:
        """The server's whole listing, read now (``toolgraph mcp sync``)."""
        client = self._client
        if client is None:
            raise ToolError(f"MCP server {self.name} is not connected", param=self.name)
        try:
            async with asyncio.timeout(self._timeout):
                return await list_tools(client)
        except TimeoutError:
            raise ToolTimeout(f"{self.name} did not list its tools in time") from None
        except _SDK_ERRORS as exc:
            raise self._translate(self.name, exc) from None

    def _translate(self, label: str, exc: BaseException) -> ToolError:
        if isinstance(exc, MCPError) and exc.code != CONNECTION_CLOSED:
            return ToolError(f"{label}: the server refused the call: {exc}", param=label)
        if isinstance(exc, ValidationError | RuntimeError):
            return ToolError(f"{label}: the server's answer is not valid: {exc}", param=label)
        self._lost = True  # the session is gone: restart it
        self._wake.set()
        return ToolError(f"MCP server {self.name} went away during the call", param=label)

    async def _supervise(self) -> None:
        backoff = FIRST_BACKOFF
        while not self._closing:
            served = await self._serve_once()
            self.tried.set()
            if self._closing:
                break
            backoff = FIRST_BACKOFF if served else min(backoff * 2, MAX_BACKOFF)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(backoff):
                    await self._wait_closing()

    async def _wait_closing(self) -> None:
        while not self._closing:
            await self._wake.wait()
            self._wake.clear()

    async def _serve_once(self) -> bool:
        """One session, from start to end; whether it got as far as its listing."""
        transport = WatchedTransport(self.server, self.server.connect_timeout, self._policy)
        served = False
        try:
            with anyio.fail_after(self._timeout) as self._session:
                async with AsyncExitStack() as stack:
                    client = await self._connect(stack, transport, self._session)
                    served = True
                    self.failure = None
                    self.tried.set()
                    await self._watch(client, transport)
        except TimeoutError:
            self.failure = f"it did not answer within {self._timeout:.0f} s"
            log.warning("MCP server %s did not answer within %.0f s", self.name, self._timeout)
        except _SDK_ERRORS as exc:
            self.failure = f"{type(exc).__name__}: {exc}"
            log.warning("MCP server %s failed: %s", self.name, self.failure)
        except Exception as exc:  # the supervisor's outermost edge: nothing may end its restarts
            # (the SDK's task groups raise ExceptionGroups of anything, a store may fail)
            refused = _egress_refusal(exc)
            if refused is None:
                self.failure = _innermost(exc)
                log.exception("MCP server %s failed", self.name)
            else:
                self.failure = f"refused by the egress policy: {refused}"
                log.warning("MCP server %s refused by the egress policy: %s", self.name, refused)
        finally:
            self._client = None
            if not self._closing:  # at shutdown, no other process needs to hear of it
                await self._on_tools(self.name, None)
        return served

    @property
    def _timeout(self) -> float:
        return self.server.connect_timeout

    async def _connect(
        self, stack: AsyncExitStack, transport: WatchedTransport, session: anyio.CancelScope
    ) -> Client:
        client = Client(
            transport.open(),  # type: ignore[arg-type]
            mode="legacy",
            cache=None,
            message_handler=self._on_message,
        )
        await stack.enter_async_context(client)
        listing = await list_tools(client)
        session.deadline = math.inf  # the deadline was the connect's
        self._lost = self._relist = False
        self._client = client
        log.info("MCP server %s connected: %d tools", self.name, len(listing))
        await self._on_tools(self.name, listing)
        return client

    async def _watch(self, client: Client, transport: WatchedTransport) -> None:
        """Until the session ends: list again whenever the server says its tools changed."""
        ended = asyncio.create_task(transport.ended.wait())
        ended.add_done_callback(lambda _: self._wake.set())
        try:
            while not (self._closing or self._lost or transport.ended.is_set()):
                await self._wake.wait()
                self._wake.clear()
                if self._relist and not (self._closing or transport.ended.is_set()):
                    self._relist = False
                    async with asyncio.timeout(self._timeout):
                        listing = await list_tools(client)
                    log.info("MCP server %s changed its tools: %d now", self.name, len(listing))
                    await self._on_tools(self.name, listing)
        finally:
            ended.cancel()
        if not self._closing:
            log.warning("MCP server %s went away; restarting it", self.name)

    async def _on_message(self, message: types.ServerNotification | Exception) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._relist = True
            self._wake.set()


def _progress_to(label: str) -> ProgressFnT | None:
    """The call's ``notifications/progress``, told to the request's reporter, if any
    (a progress token is sent only then)."""
    report = reporter()
    if report is None:
        return None

    async def told(progress: float, total: float | None, message: str | None) -> None:
        report(progress_line(label, progress, total, message))

    return told


def _innermost(exc: BaseException) -> str:
    """The first leaf of an exception group (the SDK's task groups nest them), in words."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


def _egress_refusal(exc: BaseException) -> str | None:
    """The egress policy's refusal inside ``exc`` (the SDK's task groups wrap it), if any."""
    if isinstance(exc, EgressDenied):
        return exc.message
    if isinstance(exc, BaseExceptionGroup):
        found = (_egress_refusal(inner) for inner in exc.exceptions)
        return next((message for message in found if message is not None), None)
    return None


async def list_tools(client: Client) -> list[JsonValue]:
    """Every page of ``tools/list``, each tool as the JSON the server sent."""
    listing: list[JsonValue] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        listing += [
            tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in page.tools
        ]
        cursor = page.next_cursor
        if cursor is None:
            return listing
    log.warning("tools/list gave more than %d pages; the rest is left out", MAX_PAGES)
    return listing
