"""The routes beside chat that go upstream as they came, without HTTP: one service for
embeddings, completions and moderations (:mod:`proxy.protocol.relayed` names them).

Route the request's model, rename it for the upstream where the routing table says
so, and relay the upstream's answer: its bytes as a whole, or its events as they come,
through the relay chat's passthrough uses. A route that goes through litellm (an
upstream that does not speak OpenAI's API) is refused: litellm translates chat only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from proxy.context import RequestContext
from proxy.errors import InvalidRequest
from proxy.modes import Events
from proxy.protocol.relayed import Endpoint, RelayedRequest
from proxy.upstream import ModelRouter, Reply, Target, relay_events, within
from proxy.upstream.relay import RelayUpstream


@dataclass(frozen=True, slots=True)
class RelayedCall:
    """One checked request to a relayed route: ``body`` decoded, ``raw`` as it came."""

    endpoint: Endpoint
    request: RelayedRequest
    body: dict[str, Any]
    raw: bytes
    context: RequestContext


class RelayService:
    def __init__(
        self,
        router: ModelRouter,
        relay: RelayUpstream,
        request_timeout: float,
        secrets: Sequence[str],
    ) -> None:
        self._router = router
        self._relay = relay
        self._request_timeout = request_timeout
        self._secrets = tuple(secrets)

    async def complete(self, call: RelayedCall) -> Reply:
        target, body, raw = self._prepare(call)
        async with within(self._request_timeout):
            return await self._relay.complete(target, body, raw, call.context, call.endpoint.path)

    async def stream(self, call: RelayedCall) -> Events:
        """Start the upstream's stream; errors before its first byte are raised here."""
        target, body, raw = self._prepare(call)
        async with within(self._request_timeout):
            stream = await self._relay.stream(target, body, raw, call.context, call.endpoint.path)
        remaining = max(0.0, self._request_timeout - call.context.elapsed())
        return Events(relay_events(stream, call.context, remaining, self._secrets), stream.headers)

    def _prepare(self, call: RelayedCall) -> tuple[Target, dict[str, Any], bytes | None]:
        """Where the request goes, its body, and its bytes when they can go as they are."""
        model = call.request.model
        target = self._router.resolve(model or "", fallback=call.endpoint.chat_model)
        if target.via != "relay":
            raise InvalidRequest(
                f"the model '{model}' is served through litellm, which toolgraph uses for "
                f"chat completions only; /v1{call.endpoint.path} needs an OpenAI-compatible route",
                param="model",
                code="model_not_supported",
            )
        call.context.model = target.label
        if model is None or target.model == model:
            return target, call.body, call.raw
        return target, {**call.body, "model": target.model}, None
