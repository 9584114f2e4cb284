"""The owner of a response an upstream keeps: noted before its id reaches the client.

A relayed ``POST /v1/responses`` (:mod:`proxy.responses_api.native`) is answered by an
upstream that stores the response itself, under the upstream key toolgraph sends,
which every client shares. So toolgraph notes which tenant made each one
(:meth:`~proxy.responses_api.store.ResponseStore.own`) from the answer's id (a
whole reply's ``id``, a stream's ``response.created`` event), and does so before
passing the id on: a client that reads a response the moment it learns its id finds
it already its own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from proxy import json_codec, sse
from proxy.modes import Answer, Events
from proxy.responses_api.store import ResponseStore
from proxy.upstream import Reply

_CREATED = b'"response.created"'


async def owned(answer: Answer, scope: str, store: ResponseStore) -> Answer:
    """``answer`` as it came, its response noted as ``scope``'s."""
    if isinstance(answer, Reply):
        if answer.status < 400 and (response_id := _reply_id(answer.content)):
            await store.own(scope, response_id)
        return answer
    return Events(_owned_events(answer.events, scope, store), answer.headers)


async def _owned_events(
    events: AsyncIterator[bytes], scope: str, store: ResponseStore
) -> AsyncIterator[bytes]:
    """The events as they come; the first event that says anything (``response.created``
    in the Responses API) names the response, noted before it is passed on."""
    looking = True
    try:
        async for chunk in events:
            if looking and next(sse.data_fields(chunk), None) is not None:
                looking = False
                if response_id := _created_id(chunk):
                    await store.own(scope, response_id)
            yield chunk
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()


def _reply_id(content: bytes) -> str | None:
    try:
        body = json_codec.loads(content)
    except ValueError:
        return None
    response_id = body.get("id") if isinstance(body, dict) else None
    return response_id if isinstance(response_id, str) else None


def _created_id(chunk: bytes) -> str | None:
    for data in sse.data_fields_with(chunk, _CREATED):
        try:
            event = json_codec.loads(data)
        except ValueError:
            continue
        response = event.get("response") if isinstance(event, dict) else None
        if isinstance(response, dict) and isinstance(response.get("id"), str):
            return str(response["id"])
    return None
