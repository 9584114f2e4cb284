"""The input items of a stored response, as ``GET /v1/responses/{id}/input_items`` lists
them (the SDK's ``client.responses.input_items.list``).

A response's input items are everything that went into it: the input and output items
of the responses it continues (``previous_response_id``, oldest first), then its own
request's ``input``. They are fixed, ids included, when the request arrives and kept
with the response, so that every page of a listing names the same items; ``instructions``
are not among them (OpenAI lists them apart, on the response). Items are listed newest
first unless ``order=asc``, ``limit`` at a time (1 to 100, 20 by default), from after
the item ``after`` names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from proxy.errors import InvalidRequest
from proxy.protocol.responses import (
    FunctionCallItem,
    FunctionCallOutputItem,
    InputMessage,
    ResponseItemList,
    ResponsesRequest,
)
from proxy.responses_api.translation.response import new_id

Items = list[dict[str, Any]]

DEFAULT_LIMIT, MAX_LIMIT = 20, 100

#: the id prefix of each item type toolgraph gives an id to
_PREFIXES = {
    "message": "msg",
    "function_call": "fc",
    "function_call_output": "fco",
    "reasoning": "rs",
}


@dataclass(frozen=True, slots=True)
class ItemQuery:
    """One page's worth of a listing: where it starts, how long it is, which way it runs."""

    after: str | None = None
    limit: int = DEFAULT_LIMIT
    order: Literal["asc", "desc"] = "desc"


def request_items(request: ResponsesRequest) -> Items:
    """The request's ``input`` as Responses items, each with an id (the client's, else a
    new one) and a status, message text as content parts."""
    if isinstance(request.input, str):
        return [_message_item("user", request.input, None)]
    items: Items = []
    for item in request.input:
        if isinstance(item, InputMessage):
            items.append(_message_item(item.role, item.content, item.id))
            continue
        dumped = item.model_dump(mode="json", exclude_none=True)
        dumped["id"] = item.id or new_id(_PREFIXES[item.type])
        if isinstance(item, FunctionCallItem | FunctionCallOutputItem):
            dumped.setdefault("status", "completed")
        items.append(dumped)
    return items


def _message_item(
    role: str, content: str | list[dict[str, Any]], item_id: str | None
) -> dict[str, Any]:
    if isinstance(content, str):
        content = [_text_part(role, content)]
    return {
        "id": item_id or new_id("msg"),
        "type": "message",
        "role": role,
        "content": content,
        "status": "completed",
    }


def _text_part(role: str, text: str) -> dict[str, Any]:
    if role == "assistant":  # the SDK reads an assistant message as an output message
        return {"type": "output_text", "text": text, "annotations": []}
    return {"type": "input_text", "text": text}


def parse_query(params: Mapping[str, str]) -> ItemQuery:
    """The listing's query parameters, or :class:`InvalidRequest` naming the bad one."""
    order = params.get("order", "desc")
    if order not in ("asc", "desc"):
        raise InvalidRequest(
            f"Invalid 'order': {order!r}; expected 'asc' or 'desc'.",
            param="order",
            code="invalid_value",
        )
    raw_limit = params.get("limit", str(DEFAULT_LIMIT))
    try:
        limit = int(raw_limit)
    except ValueError:
        limit = 0
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidRequest(
            f"Invalid 'limit': {raw_limit!r}; expected an integer from 1 to {MAX_LIMIT}.",
            param="limit",
            code="invalid_value",
        )
    ordered: Literal["asc", "desc"] = "asc" if order == "asc" else "desc"
    return ItemQuery(after=params.get("after") or None, limit=limit, order=ordered)


def page(items: Items, query: ItemQuery) -> ResponseItemList:
    """One page of ``items`` (oldest first as stored), in the query's order."""
    ordered = items if query.order == "asc" else items[::-1]
    start = 0
    if query.after is not None:
        ids = [item.get("id") for item in ordered]
        if query.after not in ids:
            raise InvalidRequest(
                f"No input item with id '{query.after}' in this response.",
                param="after",
                code="invalid_value",
            )
        start = ids.index(query.after) + 1
    data = ordered[start : start + query.limit]
    return ResponseItemList(
        data=data,
        first_id=data[0].get("id") if data else None,
        last_id=data[-1].get("id") if data else None,
        has_more=start + query.limit < len(ordered),
    )
