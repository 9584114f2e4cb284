"""The per-request record that travels from the middleware to the upstream client."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from proxy.tenancy import ANONYMOUS

if TYPE_CHECKING:
    from proxy.tenancy.callers import Caller
    from proxy.tenancy.keys import ToolScope

_VALID_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")

current_request_id: ContextVar[str] = ContextVar("toolgraph_request_id", default="-")


@dataclass(frozen=True, slots=True)
class ToolSearch:
    """What select mode loaded of a request's deferred tools, and for which query: the
    Responses API reports it as a hosted tool search."""

    query: str
    loaded: tuple[str, ...]


@dataclass(slots=True)
class RequestContext:
    """What one request has learnt about itself so far.

    ``upstream_seconds`` accumulates the time spent waiting on the upstream (to its
    response headers for streams), so the proxy's own added time is the rest.
    """

    request_id: str
    started: float = field(default_factory=time.perf_counter)
    mode: str = "none"
    model: str = ""  # the model's metrics label (Target.label), never the client's own name
    upstream_seconds: float = 0.0
    client_key: str | None = None  # the client's own bearer, forwarded to a keyless upstream
    tenant: str = ANONYMOUS  # whose records this request reads and leaves (proxy.tenancy)
    tool_search: ToolSearch | None = None  # set by select mode when tools were deferred
    fairness: str = ANONYMOUS  # whose per-client slots its tool calls take
    tool_scope: ToolScope | None = None  # the tools its key may use; None: all
    on_finish: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    @classmethod
    def start(cls, incoming_id: str | None) -> RequestContext:
        """A context with the client's ``x-request-id`` when it is sane, a fresh one else."""
        request_id = incoming_id if incoming_id and _VALID_ID.fullmatch(incoming_id) else None
        context = cls(request_id=request_id or str(uuid.uuid4()))
        current_request_id.set(context.request_id)
        return context

    def admitted(self, caller: Caller, release: Callable[[], Awaitable[None]] | None) -> None:
        """Note who the request is (``proxy.tenancy.callers``) and what it owes its
        key's limits when it ends."""
        self.client_key, self.tenant = caller.forwarded_key, caller.tenant
        self.fairness, self.tool_scope = caller.fairness, caller.scope
        if release is not None:
            self.on_finish.append(release)

    def upstream_request_id(self) -> str | None:
        """The id to pass upstream as ``X-Request-Id``, when it is a UUID.

        vLLM makes it the engine's request id (a client reusing one would clash) and
        llama.cpp's server refuses anything else with a bare 400, so only UUIDs go:
        toolgraph's own ids always are.
        """
        try:
            return str(uuid.UUID(self.request_id))
        except ValueError:
            return None

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def overhead(self) -> float:
        """Seconds spent in toolgraph itself so far, upstream waits excluded."""
        return max(0.0, self.elapsed() - self.upstream_seconds)
