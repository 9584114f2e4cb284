"""Passthrough and select modes, without HTTP: choose the upstream, call it, relay its answer.

Select mode is this service with a ``rewrite`` (:meth:`SelectService.rewrite
<proxy.select.service.SelectService.rewrite>`) handed in where the app is wired:
neither package imports the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from proxy.context import RequestContext
from proxy.modes import ChatCall, Events, Rewrite
from proxy.upstream import ModelRouter, Reply, Target, Upstreams, relay_events, within


class ChatService:
    """Passthrough mode, and with a ``rewrite`` select mode: one upstream call,
    its answer relayed as the upstream sent it."""

    def __init__(
        self,
        router: ModelRouter,
        upstreams: Upstreams,
        request_timeout: float,
        secrets: Sequence[str],
        rewrite: Rewrite | None = None,
    ) -> None:
        self._rewrite = rewrite
        self._router = router
        self._upstreams = upstreams
        self._request_timeout = request_timeout
        self._secrets = tuple(secrets)

    async def complete(self, call: ChatCall) -> Reply:
        target, body, raw = await self._prepare(call)
        async with self._deadline():
            return await self._upstreams.for_target(target).complete(
                target, body, raw, call.context
            )

    async def stream(self, call: ChatCall) -> Events:
        """Start the upstream's stream; errors before its first byte are raised here."""
        target, body, raw = await self._prepare(call)
        upstream = self._upstreams.for_target(target)
        async with self._deadline():
            stream = await upstream.stream(target, body, raw, call.context)
        events = relay_events(stream, call.context, self._remaining(call.context), self._secrets)
        return Events(events, stream.headers)

    async def _prepare(self, call: ChatCall) -> tuple[Target, dict[str, Any], bytes | None]:
        """Where the request goes, its body, and its bytes when they can go as they are."""
        request, body = call.request, call.body
        if self._rewrite is not None:
            # Tool names are forwarded unchanged, so the answer's tool_calls need no mapping.
            # Within the deadline: the rewrite may wait for the model's load at start-up.
            async with within(self._remaining(call.context)):
                body = await self._rewrite(request, body, call.context)
        target = self._router.resolve(request.model)
        call.context.model = target.label
        if target.model == request.model and "toolgraph" not in body and body is call.body:
            return target, body, call.raw
        outgoing = {k: v for k, v in body.items() if k != "toolgraph"}
        outgoing["model"] = target.model
        return target, outgoing, None

    def _deadline(self) -> AbstractAsyncContextManager[None]:
        return within(self._request_timeout)

    def _remaining(self, context: RequestContext) -> float:
        return max(0.0, self._request_timeout - context.elapsed())
