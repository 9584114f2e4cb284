"""The models a client may ask for, as ``GET /v1/models`` lists them.

With a routing table they are its names, known at start-up. Without one they are
whatever the upstream serves: its own ``GET /models``, asked with the key a chat call
would carry (a key decides what OpenAI lists), kept :data:`LIST_TTL` seconds per key,
within :data:`LIST_TIMEOUT`, its errors relayed as the upstream's own. The configured
``upstream_model`` (which answers every unrouted chat) is always listed, first, and
retrieved without asking the upstream, so a chat UI can show it whatever the
upstream's list says.
"""

from __future__ import annotations

import asyncio
import time

from proxy.context import RequestContext
from proxy.errors import UpstreamTimeout
from proxy.protocol.models import Model, parse_model_list
from proxy.upstream.relay import RelayUpstream
from proxy.upstream.routing import ModelRouter

#: Long enough that a chat UI polling its model picker costs the upstream little,
#: short enough that a model deployed upstream shows within the minute.
LIST_TTL = 60.0
#: A model list is small; an upstream that takes longer is failing, not busy.
LIST_TIMEOUT = 10.0
_KEYS_KEPT = 64  # lists kept at once, one per upstream key in use


class ModelCatalog:
    """The routing table's names, or the upstream's own list, cached briefly."""

    def __init__(
        self,
        router: ModelRouter,
        relay: RelayUpstream,
        upstream_model: str | None,
        created: int,
    ) -> None:
        self._router = router
        self._relay = relay
        self._upstream_model = upstream_model
        self._created = created
        self._lists: dict[str | None, tuple[float, list[Model]]] = {}

    async def models(self, context: RequestContext) -> list[Model]:
        names = self._router.names()
        if names:
            return [self._own(name) for name in names]
        listed = await self._upstream_list(context)
        if self._upstream_model is None:
            return listed
        others = [model for model in listed if model.id != self._upstream_model]
        return [self._own(self._upstream_model), *others]

    async def find(self, model: str, context: RequestContext) -> Model | None:
        if not self._router.names() and model == self._upstream_model:
            return self._own(model)
        return next((found for found in await self.models(context) if found.id == model), None)

    async def _upstream_list(self, context: RequestContext) -> list[Model]:
        target = self._router.default_upstream()
        key = target.api_key or context.client_key
        kept = self._lists.get(key)
        if kept is not None and kept[0] > time.monotonic():
            return kept[1]
        try:
            async with asyncio.timeout(LIST_TIMEOUT):
                reply = await self._relay.get(target, "/models", context)
        except TimeoutError:
            raise UpstreamTimeout(
                f"the upstream did not list its models within {LIST_TIMEOUT:.0f} s"
            ) from None
        models = parse_model_list(reply.content).data
        self._keep(key, models)
        return models

    def _keep(self, key: str | None, models: list[Model]) -> None:
        self._lists.pop(key, None)
        while len(self._lists) >= _KEYS_KEPT:
            del self._lists[next(iter(self._lists))]  # the oldest
        self._lists[key] = (time.monotonic() + LIST_TTL, models)

    def _own(self, name: str) -> Model:
        return Model(id=name, object="model", created=self._created, owned_by="toolgraph")
