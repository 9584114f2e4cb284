"""An upstream's own Responses API: whether it speaks one, and the request relayed to it.

``upstream_responses`` (or a route's own ``responses``) says how ``/v1/responses``
reaches an OpenAI-compatible upstream: ``native`` relays the client's bytes to the
upstream's ``/v1/responses`` and its answer back unchanged (the upstream keeps its
own ``store``); ``translate`` goes through its chat completions; ``auto`` asks
each upstream (each base URL) once and remembers. The question is a ``POST
/responses`` of ``{"model": …}`` alone, which costs no tokens: a server without
the route answers 404, 405 or 501; one with it refuses the missing ``input``
(400 or 422). Any other answer (401, 5xx, no answer) decides nothing: that
request is translated and the next one asks again. A route served through
litellm, and every request in select or orchestrate mode, is always translated:
those modes work on chat completions.
``GET`` and ``DELETE /v1/responses/{id}`` (and ``GET …/input_items``) of a response
toolgraph did not store go to the default upstream when it speaks the API.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Literal
from urllib.parse import quote

from proxy import json_codec
from proxy.context import RequestContext
from proxy.errors import UpstreamError
from proxy.modes import Answer
from proxy.protocol.responses import RESPONSES, ResponsesHead
from proxy.relayed.service import RelayedCall, RelayService
from proxy.upstream import ModelRouter, Reply, Target, within
from proxy.upstream.relay import RelayUpstream

log = logging.getLogger(__name__)

Support = Literal["auto", "native", "translate"]

_NO_ROUTE = frozenset({404, 405, 501})
_ROUTE = frozenset({400, 422})


class NativeResponses:
    def __init__(
        self,
        router: ModelRouter,
        relayed: RelayService,
        relay: RelayUpstream,
        support: Support,
        timeout: float,
    ) -> None:
        self._router = router
        self._relayed = relayed
        self._relay = relay
        self._timeout = timeout
        self._support = support
        self._known: dict[str, bool] = {}  # base URL -> speaks the Responses API
        self._asking = asyncio.Lock()

    async def speaks(self, head: ResponsesHead, context: RequestContext) -> bool:
        """Whether ``head``'s upstream answers ``/v1/responses`` itself."""
        return await self._speaks(self._router.resolve(head.model), context)

    async def stored(
        self, method: str, response_id: str, context: RequestContext, suffix: str = ""
    ) -> Reply | None:
        """The default upstream's answer to a ``GET`` or ``DELETE`` of one of its stored
        responses (or of what ``suffix`` names under it: ``/input_items?…``), as it sent
        it; ``None`` when it does not speak the Responses API."""
        target = self._router.resolve("")
        if not await self._speaks(target, context):
            return None
        path = f"/responses/{quote(response_id, safe='')}{suffix}"
        async with within(self._timeout):
            if method == "DELETE":
                return await self._relay.delete(target, path, context)
            return await self._relay.get(target, path, context)

    async def _speaks(self, target: Target, context: RequestContext) -> bool:
        support = target.responses or self._support  # a route's own setting first
        if target.via != "relay" or support == "translate":
            return False
        if support == "native":
            return True
        base_url = target.base_url or ""
        if base_url not in self._known:
            async with self._asking:  # concurrent first requests ask once
                if base_url not in self._known:
                    await self._ask(base_url, target.model, context)
        return self._known.get(base_url, False)

    async def relay(
        self, head: ResponsesHead, body: dict[str, Any], raw: bytes, context: RequestContext
    ) -> Answer:
        """The request as the client sent it (less toolgraph's own field), the answer as
        the upstream sent it."""
        if "toolgraph" in body:
            body = {key: value for key, value in body.items() if key != "toolgraph"}
            raw = json_codec.dumps(body)
        call = RelayedCall(RESPONSES, head, body, raw, context)
        if head.streams:
            return await self._relayed.stream(call)
        return await self._relayed.complete(call)

    async def _ask(self, base_url: str, model: str, context: RequestContext) -> None:
        question = {"model": model}
        call = RelayedCall(
            RESPONSES, ResponsesHead(model=model), question, json_codec.dumps(question), context
        )
        try:
            await self._relayed.complete(call)
            answer = True
        except UpstreamError as exc:
            if exc.status not in _NO_ROUTE | _ROUTE:
                log.warning("upstream_responses auto: no answer yet (%d)", exc.status)
                return
            answer = exc.status in _ROUTE
        log.info("upstream_responses auto: %s answers /responses %s", base_url, answer)
        self._known[base_url] = answer
