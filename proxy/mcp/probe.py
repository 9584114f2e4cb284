"""One connection to an MCP server that is not added yet: start it, list its tools, stop.

The console's add-a-server form (``POST /v1/toolgraph/mcp/servers?dry_run=true``)
shows what a server offers before anything is saved. :func:`probe_server` opens a
session of its own (never the supervised one of :mod:`proxy.mcp.connection`), reads
every page of ``tools/list`` within the server's ``connect_timeout`` and closes it.

What went wrong is said in words a person can act on (the command is not there, the
server exited and wrote this, nothing listens at the URL, it answered HTTP 401), as a
:class:`~proxy.errors.ToolError`; the SDK's exceptions, often nested in task groups,
are translated here and go no further. A stdio server's stderr is kept for that
message instead of going to the proxy's.
"""

from __future__ import annotations

import tempfile
from typing import TextIO

import anyio
import httpx2
from mcp import Client, MCPError
from mcp_types import CONNECTION_CLOSED
from pydantic import JsonValue, ValidationError

from proxy.config import McpServerSettings
from proxy.errors import EgressDenied, ToolError, ToolTimeout
from proxy.execute.egress import EgressPolicy
from proxy.mcp.connection import list_tools
from proxy.mcp.transport import WatchedTransport

#: Characters of a stdio server's stderr quoted in the error (its last ones).
STDERR_CHARS = 600

CODE = "mcp_server_unreachable"

# What a server that cannot be used makes the SDK raise: a process that cannot start
# or ends, a connection refused or answered with an error status, an answer that is
# not MCP, the egress policy's refusal.
_FAILURES = (
    OSError,
    httpx2.HTTPError,
    MCPError,
    ValidationError,
    RuntimeError,
    EgressDenied,
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
)


async def probe_server(server: McpServerSettings, policy: EgressPolicy) -> list[JsonValue]:
    """``server``'s whole listing, read over a session opened for it and closed after."""
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
        transport = WatchedTransport(server, server.connect_timeout, policy, errlog=errlog)
        try:
            # anyio's deadline: the SDK's shielded stop of a stdio server holds it off
            with anyio.fail_after(server.connect_timeout):
                async with Client(transport.open(), mode="legacy", cache=None) as client:  # type: ignore[arg-type]
                    return await list_tools(client)
        except TimeoutError:
            raise ToolTimeout(
                f"MCP server {server.name} did not answer initialize and tools/list within "
                f"{server.connect_timeout:g} s",
                param="connect_timeout",
                code=CODE,
            ) from None
        except Exception as exc:  # the SDK's task groups wrap what failed
            leaf = _leaf(exc)
            if not isinstance(leaf, _FAILURES):
                raise
            raise _in_words(server, leaf, _tail(errlog), transport.error_statuses) from None


def _leaf(exc: BaseException) -> BaseException:
    """The first exception inside (nested) exception groups: what actually failed."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _tail(errlog: TextIO) -> str:
    errlog.seek(0)
    return errlog.read().strip()[-STDERR_CHARS:]


def _in_words(
    server: McpServerSettings, exc: BaseException, stderr: str, statuses: list[int]
) -> ToolError:
    if isinstance(exc, EgressDenied):
        return exc
    param = "url" if server.url is not None else "command"
    where = server.url or " ".join(server.command)
    # The SDK turns an error status into an MCPError of its own words; say the status.
    answered = statuses and isinstance(exc, MCPError)
    said = f"{where} answered HTTP {statuses[0]}" if answered else _problem(server, exc, where)
    return ToolError(
        f"MCP server {server.name}: {said}" + (f"; it wrote: {stderr}" if stderr else ""),
        param=param,
        code=CODE,
    )


def _problem(server: McpServerSettings, exc: BaseException, where: str) -> str:
    if isinstance(exc, FileNotFoundError | PermissionError):
        reason = "no such file" if isinstance(exc, FileNotFoundError) else "not executable"
        return f"cannot start {server.command[0]!r} ({reason})"
    if isinstance(exc, httpx2.HTTPError):
        return f"cannot reach {where}: {exc}"
    if isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED:
        return "the server closed the connection before it answered initialize"
    if isinstance(exc, MCPError):
        return f"the server refused: {exc}"
    if isinstance(exc, ValidationError | RuntimeError):
        return f"its answer is not MCP: {exc}"
    return f"the connection failed: {type(exc).__name__}: {exc}"
