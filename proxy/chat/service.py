"""Passthrough and select modes, without HTTP: choose the upstream, call it, relay its answer.

Select mode is this service with a ``rewrite`` (:meth:`SelectService.rewrite
<proxy.select.service.SelectService.rewrite>`) handed in where the app is wired:
neither package imports the other. With ``observe`` (learning on), select mode reports
an answer's forwarded and called tools once it is relayed (a stream once it has ended),
in the background.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from proxy import json_codec
from proxy.context import RequestContext
from proxy.modes import ChatCall, Events, ObserveTools, Rewrite
from proxy.upstream import ModelRouter, Reply, Target, Upstreams, relay_events, within

log = logging.getLogger(__name__)


def tool_names(body: dict[str, Any]) -> list[str]:
    """The function tools a request forwards, by name."""
    tools = body.get("tools")
    found = []
    for tool in tools if isinstance(tools, list) else []:
        function = tool.get("function") if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if isinstance(name, str):
            found.append(name)
    return found


def called_tools(reply: Reply) -> list[str]:
    """The tools a whole chat completion calls, by name (none in a body that is not one)."""
    try:
        body = json_codec.loads(reply.content)
    except ValueError:
        return []
    choices = body.get("choices") if isinstance(body, dict) else None
    called = []
    for choice in choices if isinstance(choices, list) else []:
        message = choice.get("message") if isinstance(choice, dict) else None
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        called += tool_names({"tools": calls})
    return called


def streamed_calls(chunk: bytes) -> list[str]:
    """The names of the tool calls a piece of a chat completion stream opens."""
    called = []
    for line in chunk.splitlines():
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        try:
            event = json_codec.loads(line[6:])
        except ValueError:
            continue
        choices = event.get("choices") if isinstance(event, dict) else None
        for choice in choices if isinstance(choices, list) else []:
            delta = choice.get("delta") if isinstance(choice, dict) else None
            called += tool_names(
                {"tools": delta.get("tool_calls") if isinstance(delta, dict) else None}
            )
    return called


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
        observe: ObserveTools | None = None,
    ) -> None:
        self._rewrite = rewrite
        self._observe = observe
        self._pending: set[asyncio.Task[None]] = set()
        self._router = router
        self._upstreams = upstreams
        self._request_timeout = request_timeout
        self._secrets = tuple(secrets)

    async def complete(self, call: ChatCall) -> Reply:
        target, body, raw = await self._prepare(call)
        async with self._deadline():
            reply = await self._upstreams.for_target(target).complete(
                target, body, raw, call.context
            )
        if self._observe is not None and self._rewrite is not None:
            self._report(call.context.tenant, tool_names(body), called_tools(reply))
        return reply

    def _report(self, tenant: str, forwarded: list[str], called: list[str]) -> None:
        """Hand the tools' use to ``observe`` in the background: off the answer's path."""
        assert self._observe is not None
        task = asyncio.get_running_loop().create_task(self._observe(tenant, forwarded, called))
        self._pending.add(task)
        task.add_done_callback(self._done)

    async def _watched(
        self, events: AsyncIterator[bytes], tenant: str, forwarded: list[str]
    ) -> AsyncIterator[bytes]:
        """``events`` as they come, their tool calls' names noted; reported once the
        stream has ended (a stream the client left is not)."""
        called: list[str] = []
        async for chunk in events:
            if b'"tool_calls"' in chunk:
                called += streamed_calls(chunk)
            yield chunk
        self._report(tenant, forwarded, called)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._pending.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("select-mode tool use not recorded", exc_info=task.exception())

    async def stream(self, call: ChatCall) -> Events:
        """Start the upstream's stream; errors before its first byte are raised here."""
        target, body, raw = await self._prepare(call)
        upstream = self._upstreams.for_target(target)
        async with self._deadline():
            stream = await upstream.stream(target, body, raw, call.context)
        events = relay_events(stream, call.context, self._remaining(call.context), self._secrets)
        if self._observe is not None and self._rewrite is not None:
            events = self._watched(events, call.context.tenant, tool_names(body))
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
