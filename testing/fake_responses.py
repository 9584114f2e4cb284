"""The fake upstream's Responses API (``POST /v1/responses``), for the tests of an
upstream that speaks it: toolgraph must relay the request and the answer unchanged.

Answers are the fake's chat answers (:class:`testing.fake_upstream.Script`) put in the
Responses API's shapes by toolgraph's own translation; the tests tell a relayed
answer from a translated one by its ids (``resp_fake…``) and by the path the
request reached.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

from proxy import json_codec, sse
from proxy.protocol.chat import ChatCompletion, ChatCompletionChunk
from proxy.protocol.responses import ResponsesRequest
from proxy.responses_api.translation.events import EventTranslator
from proxy.responses_api.translation.request import chat_body, conversation
from proxy.responses_api.translation.response import skeleton, to_response
from testing.fake_wire import send, send_json


def chat_request(body: dict[str, Any]) -> dict[str, Any]:
    """What the fake's chat answer is made from: the request in chat's terms.

    Parsed leniently: a Responses-speaking upstream takes items (hosted tools, say)
    that toolgraph's translation refuses, and the fake answers them all the same.
    """
    request = ResponsesRequest.model_construct(
        model=str(body.get("model", "fake-model")),
        input=_text_input(body.get("input")),
        instructions=body.get("instructions"),
        stream=bool(body.get("stream")),
    )
    return chat_body(request, conversation(request, []))


def response(body: dict[str, Any], completion: dict[str, Any], number: int) -> bytes:
    """The whole answer, from the fake's chat completion for it."""
    answer = to_response(ChatCompletion.model_validate(completion), _skeleton(body, number))
    return json_codec.dumps(answer.model_dump(mode="json"))


def events(body: dict[str, Any], chunks: Iterator[bytes], number: int) -> Iterator[bytes]:
    """The streamed answer, from the fake's chat chunks for it: named events, no [DONE]."""
    translator = EventTranslator(_skeleton(body, number))
    out = translator.start()
    for chunk in chunks:
        if chunk == sse.DONE_DATA:
            out += translator.finish()
            break
        out += translator.chunk(ChatCompletionChunk.model_validate(json_codec.loads(chunk)))
    for event in out:
        yield sse.named_event(event.type, json_codec.dumps(event.model_dump(mode="json")))


def _skeleton(body: dict[str, Any], number: int) -> Any:
    request = ResponsesRequest.model_construct(
        model=str(body.get("model", "fake-model")), input="", instructions=None
    )
    return skeleton(request, f"resp_fake{number:06d}")


def _text_input(items: Any) -> str:
    if isinstance(items, str):
        return items
    texts = [
        item["content"]
        for item in items or ()
        if isinstance(item, dict) and isinstance(item.get("content"), str)
    ]
    return texts[-1] if texts else ""


async def answer_stored(
    writer: asyncio.StreamWriter, stored: dict[str, bytes], method: str, path: str
) -> None:
    """GET or DELETE of a stored response (or GET of its input items), by its path."""
    tail = path.split("?", 1)[0].split("/responses/", 1)[1]
    response_id, _, listing = tail.partition("/")  # listing: "input_items"
    content = stored.get(response_id)
    if content is None or listing not in ("", "input_items"):
        error = {
            "message": f"Response with id '{response_id}' not found.",
            "type": "invalid_request_error",
        }
        await send_json(writer, 404, {"error": {**error, "param": None, "code": None}})
    elif listing:  # its input items are not kept: an empty page says it answered
        page: dict[str, Any] = {"object": "list", "data": [], "first_id": None}
        await send_json(writer, 200, page | {"last_id": None, "has_more": False})
    elif method == "DELETE":
        del stored[response_id]
        await send_json(
            writer, 200, {"id": response_id, "object": "response.deleted", "deleted": True}
        )
    else:
        await send(writer, 200, content, "application/json", {})
