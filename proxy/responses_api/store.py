"""Stored responses: what ``previous_response_id`` continues and ``GET`` returns.

Each entry is one response with the conversation up to it, as the Responses items its
input was (what ``input_items`` lists: :mod:`proxy.responses_api.items`), kept once:
a follow-up reads them, with the response's output, as chat messages
(:func:`~proxy.responses_api.translation.request.history_messages`), in one read however
long the chain. It is kept under
the tenant of the client that made it (:mod:`proxy.tenancy`): another client's id
reads as unknown, never as forbidden, so ids cannot be probed. A response an
upstream made and keeps itself (relayed, :mod:`proxy.responses_api.native`) leaves
only its owner here (:meth:`ResponseStore.own`), so that it is read, listed,
continued and deleted under the same rule. Kept in the app's :mod:`proxy.kv` store
(Redis when configured) as its own use, ``responses``, within
``responses.max_stored``, ``responses.max_total_bytes`` and ``responses.store_ttl``,
each tenant's within ``responses.tenant_bytes`` (its own oldest go first).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from proxy import json_codec
from proxy.config import ResponsesSettings
from proxy.errors import InvalidRequest, NotFound, StoreFull
from proxy.kv import Bound, KeyValue, open_key_value

log = logging.getLogger(__name__)

Messages = list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Stored:
    response: dict[str, Any]
    items: Messages  # its input items, ids and all: the conversation up to it

    def history(self) -> Messages:
        """The input items of a response that continues this one: its own, then its output."""
        return [*self.items, *self.response.get("output", ())]


class ResponseStore:
    def __init__(self, redis: Redis | None, settings: ResponsesSettings) -> None:
        bound = Bound(
            "responses",
            settings.max_stored,
            settings.max_stored_bytes,
            max_bytes=settings.max_total_bytes,
            tenant_bytes=settings.tenant_bytes,
        )
        self._kv: KeyValue = open_key_value(redis, bound)
        self._ttl = settings.store_ttl

    async def save(self, scope: str, stored: Stored) -> None:
        """Keep ``stored``; one too large to keep is logged and left out."""
        response = stored.response
        value = json_codec.dumps({"scope": scope, "response": response, "items": stored.items})
        try:
            await self._kv.put(_key(response["id"]), value, self._ttl, tenant=scope)
        except StoreFull as exc:
            log.warning("response %s not stored: %s", response["id"], exc.message)

    async def find(self, scope: str, response_id: str) -> Stored | None:
        value = await self._kv.get(_key(response_id))
        if value is None:
            return None
        entry = json_codec.loads(value)
        if entry.get("scope") != scope:
            return None
        # an entry kept before input items were: listed as having none
        return Stored(entry["response"], entry.get("items", []))

    async def previous(self, scope: str, response_id: str) -> Stored:
        """The response a ``previous_response_id`` continues, or a 400."""
        stored = await self.find(scope, response_id)
        if stored is None:
            raise InvalidRequest(
                f"Previous response with id '{response_id}' not found.",
                param="previous_response_id",
                code="previous_response_not_found",
            )
        return stored

    async def delete(self, response_id: str) -> None:
        await self._kv.delete(_key(response_id))

    async def own(self, scope: str, response_id: str) -> None:
        """Note that the upstream's stored response ``response_id`` is ``scope``'s."""
        try:
            await self._kv.put(_relayed_key(response_id), scope.encode(), self._ttl, tenant=scope)
        except StoreFull as exc:
            log.warning("owner of response %s not kept: %s", response_id, exc.message)

    async def owns(self, scope: str, response_id: str) -> bool:
        """Whether the upstream's stored response ``response_id`` is ``scope``'s."""
        return await self._kv.get(_relayed_key(response_id)) == scope.encode()

    async def disown(self, response_id: str) -> None:
        await self._kv.delete(_relayed_key(response_id))


def _key(response_id: str) -> str:
    return f"response:{response_id}"


def _relayed_key(response_id: str) -> str:
    return f"relayed:{response_id}"


def not_found(response_id: str) -> NotFound:
    return NotFound(f"Response with id '{response_id}' not found.", code="response_not_found")
