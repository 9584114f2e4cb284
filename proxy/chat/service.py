"""Chat completions, without HTTP: choose the upstream, call it, shape the answer."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal

from proxy import metrics
from proxy.config import Limits
from proxy.context import RequestContext
from proxy.errors import InvalidRequest, ToolgraphError, UpstreamTimeout
from proxy.protocol.chat import ChatCompletionRequest
from proxy.select.service import SelectService
from proxy.upstream import EventStream, ModelRouter, Reply, Target, Upstreams, within

log = logging.getLogger(__name__)

Mode = Literal["passthrough", "select", "orchestrate"]


class ChatService:
    def __init__(
        self,
        router: ModelRouter,
        upstreams: Upstreams,
        limits: Limits,
        request_timeout: float,
        secrets: Sequence[str],
        select: SelectService | None = None,
        default_mode: Mode = "passthrough",
    ) -> None:
        self._select = select
        self._default_mode = default_mode
        self._router = router
        self._upstreams = upstreams
        self._limits = limits
        self._request_timeout = request_timeout
        self._secrets = tuple(secrets)

    def mode_of(self, request: ChatCompletionRequest) -> Mode:
        """The request's own mode, else the configured one where it fits the request.

        A request that brings tools or tool results of its own runs them itself: the
        configured default never orchestrates it, and never selects without tools.
        """
        if request.toolgraph is not None and request.toolgraph.mode is not None:
            return request.toolgraph.mode
        mode = self._default_mode
        if mode == "orchestrate" and (request.tools or _has_tool_results(request)):
            return "passthrough"
        if mode == "select" and not request.tools:
            return "passthrough"
        return mode

    async def complete(
        self,
        request: ChatCompletionRequest,
        body: dict[str, Any],
        raw: bytes,
        context: RequestContext,
    ) -> Reply:
        body = await self._select_tools(request, body)
        target, body, same_bytes = self._prepare(request, body, context)
        upstream = self._upstreams.for_target(target)
        async with self._deadline():
            return await upstream.complete(target, body, raw if same_bytes else None, context)

    async def open_stream(
        self,
        request: ChatCompletionRequest,
        body: dict[str, Any],
        raw: bytes,
        context: RequestContext,
    ) -> EventStream:
        """Start the upstream's stream; errors before its first byte are raised here."""
        body = await self._select_tools(request, body)
        target, body, same_bytes = self._prepare(request, body, context)
        upstream = self._upstreams.for_target(target)
        async with self._deadline():
            return await upstream.stream(target, body, raw if same_bytes else None, context)

    async def relay_events(
        self, stream: EventStream, context: RequestContext
    ) -> AsyncIterator[bytes]:
        """The client's side of a started stream; an error ends it with an error event."""
        first = True
        try:
            async with asyncio.timeout(self._remaining(context)):
                async for events in stream:
                    if first:
                        metrics.TIME_TO_FIRST_TOKEN.labels(context.mode, context.model).observe(
                            context.elapsed()
                        )
                        first = False
                    yield events
        except TimeoutError:
            log.warning("stream cut at the request deadline")
            yield UpstreamTimeout("the request exceeded its time limit while streaming").to_sse(
                self._secrets
            )
        except ToolgraphError as exc:
            log.warning("stream ended by %s: %s", type(exc).__name__, exc.message)
            yield exc.to_sse(self._secrets)
        finally:
            await stream.aclose()

    def _prepare(
        self, request: ChatCompletionRequest, body: dict[str, Any], context: RequestContext
    ) -> tuple[Target, dict[str, Any], bool]:
        target = self._router.resolve(request.model)
        context.mode = self.mode_of(request)
        context.model = target.label
        if target.model == request.model and "toolgraph" not in body:
            return target, body, True
        outgoing = {k: v for k, v in body.items() if k != "toolgraph"}
        outgoing["model"] = target.model
        return target, outgoing, False

    async def _select_tools(
        self, request: ChatCompletionRequest, body: dict[str, Any]
    ) -> dict[str, Any]:
        # Tool names are forwarded unchanged, so the answer's tool_calls need no mapping.
        if self.mode_of(request) != "select":
            return body
        if self._select is None:
            raise InvalidRequest("select mode is not enabled here", param="toolgraph.mode")
        return await self._select.rewrite(request, body)

    def _deadline(self) -> AbstractAsyncContextManager[None]:
        return within(self._request_timeout)

    def _remaining(self, context: RequestContext) -> float:
        return max(0.0, self._request_timeout - context.elapsed())


def _has_tool_results(request: ChatCompletionRequest) -> bool:
    return any(message.role in ("tool", "function") for message in request.messages)
