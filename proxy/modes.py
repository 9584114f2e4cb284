"""The one shape every mode of chat completions has: a call in, an answer out.

The router decides a request's mode once, at the door (into
:attr:`RequestContext.mode <proxy.context.RequestContext.mode>`), then hands the
mode's service a :class:`ChatCall` through ``complete`` or ``stream``. What comes
back is a :class:`~proxy.upstream.Reply` (whole bytes, answered as JSON) or
:class:`Events` (answered as server-sent events). A stream may still be answered
with a :class:`Reply`: orchestrate mode replays a stored error that way.

A second API (the Responses API) reaches the same modes by translating its request
into a :class:`ChatCall` and their answers back into its own shapes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from proxy.context import RequestContext
from proxy.errors import InvalidRequest
from proxy.protocol.chat import ChatCompletionRequest, Mode
from proxy.upstream import Reply

#: What select mode does to a request before it goes upstream: its tools cut down
#: (:meth:`proxy.select.service.SelectService.rewrite`), for chat and for Responses
#: requests relayed as they are.
Rewrite = Callable[
    [ChatCompletionRequest, dict[str, Any], RequestContext], Awaitable[dict[str, Any]]
]
#: What select mode reports after a whole answer: the tenant, the tools it forwarded,
#: the ones the model called (:meth:`proxy.learning.service.Learner.observe_select`).
ObserveTools = Callable[[str, list[str], list[str]], Coroutine[Any, Any, None]]


@dataclass(frozen=True, slots=True)
class ChatCall:
    """One checked chat completion request, as every mode receives it.

    ``body`` is the decoded body (what passthrough forwards: unknown fields and all),
    ``raw`` its bytes as they came (sent as they are when nothing in them changes).
    """

    request: ChatCompletionRequest
    body: dict[str, Any]
    raw: bytes
    context: RequestContext
    idempotency_key: str | None = None


@dataclass(slots=True)
class Events:
    """A streamed answer: its headers at once, then its SSE events as they come."""

    events: AsyncIterator[bytes]
    headers: dict[str, str] = field(default_factory=dict)


Answer = Reply | Events


class ChatMode(Protocol):
    """A mode's service: passthrough, select or orchestrate."""

    async def complete(self, call: ChatCall) -> Reply:
        """The whole answer of a request that does not stream."""
        ...

    async def stream(self, call: ChatCall) -> Answer:
        """A started stream; errors before its first event are raised here."""
        ...


@dataclass(frozen=True, slots=True)
class Modes:
    """The modes an app serves, by name: the dispatch table of chat completions."""

    services: Mapping[Mode, ChatMode]
    default: Mode = "passthrough"

    def service(self, mode: Mode) -> ChatMode:
        found = self.services.get(mode)
        if found is None:
            raise InvalidRequest(f"{mode} mode is not enabled here", param="toolgraph.mode")
        return found
