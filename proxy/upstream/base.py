"""The interface every upstream client implements."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from proxy import metrics
from proxy.context import RequestContext
from proxy.errors import ToolgraphError, UpstreamTimeout
from proxy.upstream.routing import Target

log = logging.getLogger(__name__)

# Headers of the upstream's answer that the client should see: the SDK's retry
# logic reads retry-after and x-should-retry, dashboards read the rate limits.
FORWARDED_HEADER_PREFIXES = ("x-ratelimit-", "retry-after", "x-should-retry")


@dataclass(slots=True)
class Reply:
    """A whole (non-streamed) answer, as the bytes the client will receive: a chat
    completion, or a stored answer replayed (``status`` is then its own)."""

    content: bytes
    headers: dict[str, str] = field(default_factory=dict)
    status: int = 200


class EventStream(Protocol):
    """A started stream: SSE events as bytes, each ending in a blank line.

    Iterating may raise :class:`proxy.errors.UpstreamError` mid-stream; ``aclose``
    releases the upstream connection and is safe to call more than once.
    """

    headers: dict[str, str]

    def __aiter__(self) -> AsyncIterator[bytes]: ...

    async def aclose(self) -> None: ...


class Upstream(Protocol):
    async def complete(
        self, target: Target, body: dict[str, Any], raw: bytes | None, context: RequestContext
    ) -> Reply:
        """Answer a non-streamed request; ``raw`` is the body's bytes when they can go as-is."""
        ...

    async def stream(
        self, target: Target, body: dict[str, Any], raw: bytes | None, context: RequestContext
    ) -> EventStream:
        """Start a streamed answer; errors before the first event are raised here."""
        ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Upstreams:
    """The two ways to an upstream: bytes relayed as they are, or litellm's translation."""

    relay: Upstream
    litellm: Upstream

    def for_target(self, target: Target) -> Upstream:
        return self.relay if target.via == "relay" else self.litellm


@asynccontextmanager
async def within(seconds: float) -> AsyncIterator[None]:
    """The body of the ``async with`` in ``seconds``, else :class:`UpstreamTimeout`."""
    try:
        async with asyncio.timeout(seconds):
            yield
    except TimeoutError:
        raise UpstreamTimeout("the request exceeded its time limit (timeouts.request)") from None


async def relay_events(
    stream: EventStream, context: RequestContext, seconds: float, secrets: Sequence[str]
) -> AsyncIterator[bytes]:
    """The client's side of a started stream, cut at ``seconds``; an error ends it with
    an error event (the headers are long gone), and the upstream connection is closed."""
    first = True
    try:
        async with asyncio.timeout(seconds):
            async for events in stream:
                if first:
                    metrics.TIME_TO_FIRST_TOKEN.labels(context.mode, context.model).observe(
                        context.elapsed()
                    )
                    first = False
                yield events
    except TimeoutError:
        log.warning("stream cut at the request deadline")
        yield UpstreamTimeout("the request exceeded its time limit while streaming").to_sse(secrets)
    except ToolgraphError as exc:
        log.warning("stream ended by %s: %s", type(exc).__name__, exc.message)
        yield exc.to_sse(secrets)
    finally:
        await stream.aclose()


async def waits_counted(stream: EventStream, context: RequestContext) -> AsyncIterator[bytes]:
    """``stream``'s events, the time spent waiting for each counted as the upstream's:
    :func:`observe_wait` counts a stream's wait up to its headers only."""
    events = aiter(stream)
    while True:
        started = time.perf_counter()
        try:
            found = await anext(events)
        except StopAsyncIteration:
            return
        context.upstream_seconds += time.perf_counter() - started
        yield found


def observe_wait(model: str, started: float, context: RequestContext, outcome: str) -> None:
    """Count time spent waiting on the upstream, so it is not charged to toolgraph."""
    waited = time.perf_counter() - started
    context.upstream_seconds += waited
    metrics.UPSTREAM_LATENCY.labels(model, outcome).observe(waited)
    log.info("upstream %s %s %.1fms", model, outcome, waited * 1000)


def record_usage(model: str, usage: object) -> None:
    """Count the tokens of an OpenAI ``usage`` object."""
    if not isinstance(usage, dict):
        return
    for kind in ("prompt_tokens", "completion_tokens"):
        count = usage.get(kind)
        if isinstance(count, int) and count > 0:
            metrics.UPSTREAM_TOKENS.labels(model, kind.removesuffix("_tokens")).inc(count)
