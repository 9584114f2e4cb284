"""``POST /v1/responses`` without HTTP: translated into a chat completion request, served
by the request's mode as chat is, and its answer translated back.

The mode is decided once, from the request's head; a passthrough request to an
upstream that speaks the Responses API itself is relayed as it is
(:mod:`proxy.responses_api.native`). The modes are the same services chat completions
dispatches to (:class:`~proxy.modes.Modes`); nothing here knows which one runs. The
conversation a request continues (``previous_response_id``) is read from the
:class:`~proxy.responses_api.store.ResponseStore` before, and the answer stored
after, unless the client says ``store: false``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from proxy import json_codec, sse
from proxy.context import RequestContext
from proxy.errors import InvalidRequest, UpstreamError
from proxy.modes import Answer, ChatCall, Events, Modes, Rewrite
from proxy.protocol.body import ON_LOOP_BYTES
from proxy.protocol.chat import Mode, parse_request, read_chunk, read_completion
from proxy.protocol.responses import (
    DeletedResponse,
    Response,
    ResponsesRequest,
    StreamEvent,
    parse_head,
    parse_responses_request,
)
from proxy.responses_api.items import ItemQuery, Items, page, request_items
from proxy.responses_api.native import NativeResponses
from proxy.responses_api.owners import owned
from proxy.responses_api.store import ResponseStore, Stored, not_found
from proxy.responses_api.translation.events import EventTranslator
from proxy.responses_api.translation.request import (
    Messages,
    chat_body,
    conversation,
    history_messages,
    relayed_turn,
)
from proxy.responses_api.translation.response import (
    search_items,
    skeleton,
    to_response,
)
from proxy.upstream import Reply
from retriever.documents import function_name

log = logging.getLogger(__name__)


class ResponsesService:
    def __init__(
        self,
        modes: Modes,
        store: ResponseStore,
        native: NativeResponses,
        select: Rewrite | None = None,
    ) -> None:
        self._modes = modes
        self.store = store
        self.native = native
        self._select = select  # select mode's rewrite, for requests relayed as they are

    async def create(
        self, body: Any, raw: bytes, context: RequestContext, scope: str, key: str | None
    ) -> Answer:
        """The answer to a decoded request: a whole response, or its stream of events."""
        head = parse_head(body)
        mode = head.resolve_mode(self._modes.default)  # decided here, and only here
        context.mode = mode
        relays = mode == "passthrough" or (mode == "select" and self._select is not None)
        if relays and await self.native.speaks(head, context):
            await self._check_previous(scope, body.get("previous_response_id"))
            if mode == "select":
                body, raw = await self._selected(body, raw, context)
            return await owned(await self.native.relay(head, body, raw, context), scope, self.store)
        if len(raw) <= ON_LOOP_BYTES:
            request = parse_responses_request(body)
        else:  # pydantic holds the GIL for a whole validation: off the loop
            request = await asyncio.to_thread(parse_responses_request, body)
        return await self.translate(request, mode, context, scope, key)

    async def _selected(
        self, body: dict[str, Any], raw: bytes, context: RequestContext
    ) -> tuple[dict[str, Any], bytes]:
        """``body`` for a Responses-speaking upstream with its function tools cut by
        select mode to the ones this turn's messages need; the rest of it as it came
        (tools and items toolgraph does not translate included). A turn whose input holds
        no message (tool results only) keeps every tool: the conversation before it is
        the upstream's."""
        assert self._select is not None
        turn = relayed_turn(body)
        if turn is None:
            return body, raw
        if len(raw) <= ON_LOOP_BYTES:
            request = parse_responses_request(turn)
        else:
            request = await asyncio.to_thread(parse_responses_request, turn)
        chat = chat_body(request, conversation(request, []))
        kept = await self._select(parse_request(chat), chat, context)
        names = {function_name(tool) for tool in kept.get("tools", ())}
        cut = {key: value for key, value in body.items() if key != "toolgraph"}
        # A function select mode dropped stays behind; every other tool goes as it came.
        cut["tools"] = [t for t in body["tools"] if function_name(t) in names | {None}]
        if not cut["tools"]:
            cut = {k: v for k, v in cut.items() if k not in ("tools", "tool_choice")}
        return cut, json_codec.dumps(cut)

    async def _check_previous(self, scope: str, response_id: object) -> None:
        """A relayed request continues only a response of its own tenant (the upstream
        would continue any it keeps): else the 400 a translated one gets."""
        if not isinstance(response_id, str) or await self.store.owns(scope, response_id):
            return  # a malformed one is the upstream's to refuse
        await self.store.previous(scope, response_id)  # toolgraph's own, or the 400

    async def retrieve(self, scope: str, response_id: str, context: RequestContext) -> Reply:
        """A stored response: toolgraph's own, else the upstream's (native)."""
        found = await self.store.find(scope, response_id)
        if found is not None:
            return Reply(json_codec.dumps(found.response))
        return await self._upstreams("GET", scope, response_id, context)

    async def input_items(
        self,
        scope: str,
        response_id: str,
        query: ItemQuery,
        raw_query: str,
        context: RequestContext,
    ) -> Reply:
        """A page of a stored response's input items: toolgraph's own, else the upstream's
        (native), asked with the client's own ``raw_query``."""
        found = await self.store.find(scope, response_id)
        if found is None:
            suffix = "/input_items" + (f"?{raw_query}" if raw_query else "")
            return await self._upstreams("GET", scope, response_id, context, suffix)
        return Reply(json_codec.dumps(page(found.items, query).model_dump(mode="json")))

    async def delete(self, scope: str, response_id: str, context: RequestContext) -> Reply:
        """Forget a stored response: toolgraph's own, else the upstream's (native)."""
        if await self.store.find(scope, response_id) is None:
            deleted = await self._upstreams("DELETE", scope, response_id, context)
            await self.store.disown(response_id)
            return deleted
        await self.store.delete(response_id)
        return Reply(json_codec.dumps(DeletedResponse(id=response_id).model_dump(mode="json")))

    async def _upstreams(
        self, method: str, scope: str, response_id: str, context: RequestContext, suffix: str = ""
    ) -> Reply:
        """The upstream's answer about one of ``scope``'s relayed responses; another
        tenant's, or one toolgraph never relayed, is unknown."""
        if not await self.store.owns(scope, response_id):
            raise not_found(response_id)
        relayed = await self.native.stored(method, response_id, context, suffix)
        if relayed is None:
            raise not_found(response_id)
        return relayed

    async def translate(
        self,
        request: ResponsesRequest,
        mode: Mode,
        context: RequestContext,
        scope: str,
        key: str | None,
    ) -> Answer:
        """``request`` served by ``mode`` as a chat completion request, its answer translated.

        A hosted ``tool_search`` is select mode's search over the deferred tools: a
        request that would pass through is served in select mode instead."""
        if request.client_tool_search():
            raise InvalidRequest(
                "tool_search with execution 'client' needs an upstream that speaks the Responses "
                "API; toolgraph runs the search itself when execution is 'server' or absent",
                param="tools",
                code="unsupported_tool_search",
            )
        if request.hosted_tool_search() and mode == "passthrough":
            mode = context.mode = "select"
        history: Messages = []
        items: Items = []
        if request.previous_response_id is not None:
            previous = await self.store.previous(scope, request.previous_response_id)
            items = previous.history()
            history = history_messages(items)
        messages = conversation(request, history)
        body = chat_body(request, messages)
        call = ChatCall(parse_request(body), body, json_codec.dumps(body), context, key)
        turn = _Turn(self.store, scope, request, [*items, *request_items(request)], context)
        service = self._modes.service(mode)
        if request.stream:
            return turn.events(await service.stream(call))
        return await turn.reply(await service.complete(call))


class _Turn:
    """One request's answer on its way back: translated, then stored."""

    def __init__(
        self,
        store: ResponseStore,
        scope: str,
        request: ResponsesRequest,
        items: Items,
        context: RequestContext,
    ) -> None:
        self._context = context  # select mode leaves its tool search here
        self._store = store
        self._scope = scope
        self._request = request
        self._items = items  # its input items, fixed (ids too) before it is answered
        self._response = skeleton(request)

    async def reply(self, reply: Reply) -> Reply:
        if reply.status >= 400:  # a stored error replayed: already in OpenAI's shape
            return reply
        self._response.output.extend(search_items(self._request, self._context.tool_search))
        response = to_response(read_completion(reply.content), self._response)
        await self._save(response)
        return Reply(dump(response), reply.headers)

    def events(self, answer: Answer) -> Answer:
        if isinstance(answer, Reply):
            return answer if answer.status >= 400 else Events(self._replayed(answer))
        return Events(self._translated(answer.events), answer.headers)

    async def _translated(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        translator = EventTranslator(self._response)
        yield _encode(translator.start())
        searched = search_items(self._request, self._context.tool_search)
        if searched:
            yield _encode(translator.done_items(searched))
        ended = False
        try:
            async for events in chunks:
                if events.startswith(b":"):  # a keep-alive comment: passed on
                    yield events
                    continue
                for data in sse.data_fields(events):
                    out, ended = _step(translator, data)
                    if out:
                        yield _encode(out)
                if ended:
                    break
        finally:
            aclose = getattr(chunks, "aclose", None)
            if aclose is not None:
                await aclose()
        if not ended:
            yield _encode(translator.finish())
        if translator.response.status != "failed":
            await self._save(translator.response)

    async def _replayed(self, reply: Reply) -> AsyncIterator[bytes]:
        translator = EventTranslator(self._response)
        yield _encode(translator.start())
        self._response.output.extend(search_items(self._request, self._context.tool_search))
        response = to_response(read_completion(reply.content), self._response)
        yield _encode([translator.whole("response.completed")])
        await self._save(response)

    async def _save(self, response: Response) -> None:
        if self._request.store is False:
            return
        stored = Stored(response.model_dump(mode="json"), self._items)
        await self._store.save(self._scope, stored)


def _step(translator: EventTranslator, data: bytes) -> tuple[list[StreamEvent], bool]:
    """The events one chat event makes, and whether the stream has ended."""
    if data == sse.DONE_DATA:
        return translator.finish(), True
    payload: Any = json_codec.loads(data)
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        error = payload["error"]
        return translator.fail(error.get("code"), str(error.get("message", "")), None), True
    try:
        return translator.chunk(read_chunk(payload)), False
    except UpstreamError as exc:
        return translator.fail(exc.code, exc.message, None), True


def dump(model: Response) -> bytes:
    """A Responses API object as JSON, every field written (its SDK requires them)."""
    return json_codec.dumps(model.model_dump(mode="json"))


def _encode(events: list[StreamEvent]) -> bytes:
    return b"".join(
        sse.named_event(event.type, json_codec.dumps(event.model_dump(mode="json")))
        for event in events
    )
