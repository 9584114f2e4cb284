"""The Responses API in terms of chat completions, both ways: the one translation.

A Responses request becomes a chat completion request (:func:`chat_body`), which
any mode serves as it serves chat; the chat completion that comes back becomes a
``response`` (:func:`to_response`), and a stream of chunks becomes the Responses
API's typed events, numbered in order (:class:`EventTranslator`).

What maps to what:

=====================================  ===============================================
Responses                              chat completions
=====================================  ===============================================
``instructions``                       a first ``system`` message (not carried over
                                       by ``previous_response_id``, as OpenAI does)
``input`` string / message items       ``user`` / ``assistant`` / ``system`` messages
                                       (``developer`` becomes ``system``)
``function_call`` items                an assistant message's ``tool_calls``
``function_call_output`` items         ``tool`` messages
``reasoning`` items                    dropped: chat has no place for them
flat function ``tools``                ``{"type": "function", "function": {...}}``
``text.format`` (JSON schema)          ``response_format``
``max_output_tokens``                  ``max_completion_tokens``
``reasoning.effort``                   ``reasoning_effort``
message ``reasoning_content``          a ``reasoning`` output item with a summary
finish ``length`` / ``content_filter``  ``incomplete`` with that reason
=====================================  ===============================================
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from typing import Any

from proxy.errors import InvalidRequest
from proxy.protocol.chat import ChatCompletion, ChatCompletionChunk, CompletionUsage
from proxy.protocol.responses import (
    ArgumentsDeltaEvent,
    ArgumentsDoneEvent,
    ContentPartEvent,
    ErrorEvent,
    FunctionCallItem,
    FunctionCallOutputItem,
    FunctionToolCall,
    IncompleteDetails,
    InputMessage,
    InputTokensDetails,
    OutputItem,
    OutputItemEvent,
    OutputMessage,
    OutputText,
    OutputTokensDetails,
    ReasoningItem,
    Refusal,
    Response,
    ResponseError,
    ResponseEvent,
    ResponsesRequest,
    ResponseUsage,
    StreamEvent,
    SummaryPartEvent,
    SummaryText,
    SummaryTextDeltaEvent,
    SummaryTextDoneEvent,
    TextDeltaEvent,
    TextDoneEvent,
)

Messages = list[dict[str, Any]]

# --- the request ---------------------------------------------------------------------------


def conversation(request: ResponsesRequest, history: Messages) -> Messages:
    """The conversation so far as chat messages: ``history`` (the messages of the
    responses ``request`` continues, oldest first), then the request's ``input``."""
    return [*history, *input_messages(request, _call_ids(history))]


def chat_body(request: ResponsesRequest, messages: Messages) -> dict[str, Any]:
    """The chat completion request for ``request``: its ``instructions``, then
    ``messages`` (its :func:`conversation`), its tools and options."""
    system = [{"role": "system", "content": request.instructions}] if request.instructions else []
    body: dict[str, Any] = {"model": request.model, "messages": [*system, *messages]}
    if request.tools:
        body["tools"] = [_chat_tool(tool.model_dump(exclude_unset=True)) for tool in request.tools]
    if request.tool_choice is not None:
        body["tool_choice"] = _tool_choice(request.tool_choice)
    body.update(_options(request))
    if request.stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    if request.toolgraph is not None:
        body["toolgraph"] = request.toolgraph.model_dump(exclude_none=True)
    return body


def input_messages(request: ResponsesRequest, known_calls: set[str]) -> Messages:
    """The request's ``input`` as chat messages; a ``function_call_output`` must answer a
    call made in ``known_calls`` (the history's) or earlier in the input."""
    if isinstance(request.input, str):
        return [{"role": "user", "content": request.input}]
    messages: Messages = []
    for index, item in enumerate(request.input):
        if isinstance(item, InputMessage):
            messages.append(_message(item, index))
        elif isinstance(item, FunctionCallItem):
            _add_call(messages, item)
            known_calls.add(item.call_id)
        elif isinstance(item, FunctionCallOutputItem):
            if item.call_id not in known_calls:
                raise InvalidRequest(
                    f"No tool call found for function call output with call_id {item.call_id}.",
                    param=f"input.[{index}].call_id",
                    code="unknown_call_id",
                )
            messages.append(_tool_result(item, index))
    return messages


def _call_ids(history: Messages) -> set[str]:
    return {
        call["id"]
        for message in history
        for call in message.get("tool_calls") or ()
        if isinstance(call, dict) and isinstance(call.get("id"), str)
    }


def _message(item: InputMessage, index: int) -> dict[str, Any]:
    role = "system" if item.role == "developer" else item.role
    if isinstance(item.content, str):
        return {"role": role, "content": item.content}
    parts = [_part(part, f"input.[{index}].content.[{n}]") for n, part in enumerate(item.content)]
    if role != "user" or all(part["type"] == "text" for part in parts):
        return {"role": role, "content": "\n".join(_texts(parts, f"input.[{index}].content"))}
    return {"role": role, "content": parts}


def _part(part: dict[str, Any], param: str) -> dict[str, Any]:
    kind = part.get("type")
    if kind in ("input_text", "output_text") and isinstance(part.get("text"), str):
        return {"type": "text", "text": part["text"]}
    if kind == "refusal" and isinstance(part.get("refusal"), str):
        return {"type": "text", "text": part["refusal"]}
    if kind == "input_image" and isinstance(part.get("image_url"), str):
        image = {
            "url": part["image_url"],
            **({"detail": part["detail"]} if "detail" in part else {}),
        }
        return {"type": "image_url", "image_url": image}
    if kind == "input_file" and ("file_data" in part or "file_id" in part):
        fields = ("file_data", "file_id", "filename")
        return {"type": "file", "file": {key: part[key] for key in fields if key in part}}
    raise InvalidRequest(
        f"a content part of type {kind!r} cannot be sent to a chat completions upstream",
        param=param,
        code="unsupported_content_type",
    )


def _texts(parts: Iterable[dict[str, Any]], param: str) -> list[str]:
    texts = []
    for part in parts:
        if part["type"] != "text":
            raise InvalidRequest(
                "only text parts can go in this message on a chat completions upstream",
                param=param,
                code="unsupported_content_type",
            )
        texts.append(part["text"])
    return texts


def _add_call(messages: Messages, item: FunctionCallItem) -> None:
    """A call joins the assistant message before it, as chat spells parallel calls."""
    call = {
        "id": item.call_id,
        "type": "function",
        "function": {"name": item.name, "arguments": item.arguments},
    }
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "assistant":
        last.setdefault("tool_calls", []).append(call)
        return
    messages.append({"role": "assistant", "content": None, "tool_calls": [call]})


def _tool_result(item: FunctionCallOutputItem, index: int) -> dict[str, Any]:
    output = item.output
    if not isinstance(output, str):
        param = f"input.[{index}].output"
        parts = [_part(part, f"{param}.[{n}]") for n, part in enumerate(output)]
        output = "\n".join(_texts(parts, param))
    return {"role": "tool", "tool_call_id": item.call_id, "content": output}


def _chat_tool(tool: dict[str, Any]) -> dict[str, Any]:
    function = {key: value for key, value in tool.items() if key != "type"}
    return {"type": "function", "function": function}


def _tool_choice(choice: str | dict[str, Any]) -> str | dict[str, Any]:
    if isinstance(choice, str):
        return choice
    if choice.get("type") == "function" and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    raise InvalidRequest(
        f"tool_choice of type {choice.get('type')!r} cannot be sent to a chat completions "
        "upstream; use auto, none, required or a function",
        param="tool_choice",
        code="unsupported_tool_choice",
    )


def _options(request: ResponsesRequest) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for name in ("parallel_tool_calls", "temperature", "top_p", "user"):
        if (value := getattr(request, name)) is not None:
            options[name] = value
    if request.max_output_tokens is not None:
        options["max_completion_tokens"] = request.max_output_tokens
    if request.reasoning is not None and request.reasoning.effort is not None:
        options["reasoning_effort"] = request.reasoning.effort
    text = request.text
    if text is not None and text.verbosity is not None:
        options["verbosity"] = text.verbosity
    if text is not None and text.format is not None and text.format.type != "text":
        options["response_format"] = _response_format(text.format.model_dump(by_alias=True))
    return options


def _response_format(format_: dict[str, Any]) -> dict[str, Any]:
    if format_["type"] == "json_object":
        return {"type": "json_object"}
    fields = ("name", "schema", "description", "strict")
    schema = {key: format_[key] for key in fields if format_.get(key) is not None}
    return {"type": "json_schema", "json_schema": schema}


# --- the answer ------------------------------------------------------------------------------


def new_id(prefix: str) -> str:
    """An id in OpenAI's style: ``resp_…``, ``msg_…``, ``fc_…``, ``rs_…``."""
    return f"{prefix}_{uuid.uuid4().hex}"


def skeleton(request: ResponsesRequest, response_id: str | None = None) -> Response:
    """The response to ``request`` before any output: what it echoes of the request."""
    text_format = request.text.format if request.text and request.text.format else None
    return Response(
        id=response_id or new_id("resp"),
        created_at=int(time.time()),
        status="in_progress",
        error=None,
        incomplete_details=None,
        instructions=request.instructions,
        max_output_tokens=request.max_output_tokens,
        model=request.model,
        output=[],
        parallel_tool_calls=request.parallel_tool_calls is not False,
        previous_response_id=request.previous_response_id,
        reasoning=request.reasoning.model_dump(exclude_unset=True) if request.reasoning else None,
        store=request.store is not False,
        temperature=request.temperature,
        text={"format": text_format.model_dump(by_alias=True, exclude_unset=True)}
        if text_format
        else {"format": {"type": "text"}},
        tool_choice=request.tool_choice if request.tool_choice is not None else "auto",
        tools=[tool.model_dump(exclude_unset=True) for tool in request.tools or ()],
        top_p=request.top_p,
        truncation="disabled",
        usage=None,
        user=request.user,
        metadata=request.metadata or {},
    )


def to_response(completion: ChatCompletion, response: Response) -> Response:
    """``response`` (a :func:`skeleton`) finished with the chat completion's answer."""
    choice = completion.choices[0] if completion.choices else None
    if choice is not None:
        message = choice.message
        reasoning = (message.model_extra or {}).get("reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            response.output.append(_reasoning_item(reasoning, "completed"))
        parts: list[OutputText | Refusal] = []
        if message.content:
            parts.append(OutputText(text=message.content))
        if message.refusal:
            parts.append(Refusal(refusal=message.refusal))
        if parts:
            response.output.append(OutputMessage(id=new_id("msg"), content=parts))
        for call in message.tool_calls or ():
            function = call.function
            name, arguments = (function.name, function.arguments) if function else ("", "")
            response.output.append(
                FunctionToolCall(id=new_id("fc"), call_id=call.id, name=name, arguments=arguments)
            )
    _finish(response, choice.finish_reason if choice else None, completion.usage)
    return response


def _reasoning_item(text: str, status: str) -> ReasoningItem:
    return ReasoningItem(id=new_id("rs"), summary=[SummaryText(text=text)], status=status)


def _finish(response: Response, finish_reason: str | None, usage: CompletionUsage | None) -> None:
    if finish_reason == "length":
        response.status = "incomplete"
        response.incomplete_details = IncompleteDetails(reason="max_output_tokens")
    elif finish_reason == "content_filter":
        response.status = "incomplete"
        response.incomplete_details = IncompleteDetails(reason="content_filter")
    else:
        response.status = "completed"
    if usage is not None:
        response.usage = to_usage(usage)


def to_usage(usage: CompletionUsage) -> ResponseUsage:
    extra = usage.model_extra or {}
    prompt_details = extra.get("prompt_tokens_details") or {}
    completion_details = extra.get("completion_tokens_details") or {}
    return ResponseUsage(
        input_tokens=usage.prompt_tokens,
        input_tokens_details=InputTokensDetails(
            cached_tokens=prompt_details.get("cached_tokens") or 0
        ),
        output_tokens=usage.completion_tokens,
        output_tokens_details=OutputTokensDetails(
            reasoning_tokens=completion_details.get("reasoning_tokens") or 0
        ),
        total_tokens=usage.total_tokens or usage.prompt_tokens + usage.completion_tokens,
    )


def assistant_message(response: Response) -> dict[str, Any]:
    """The response's output as the chat message that continues its conversation."""
    message: dict[str, Any] = {"role": "assistant", "content": response.output_text() or None}
    calls = [item for item in response.output if isinstance(item, FunctionToolCall)]
    if calls:
        message["tool_calls"] = [
            {
                "id": call.call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in calls
        ]
    return message


# --- the stream --------------------------------------------------------------------------------


class EventTranslator:
    """Chat chunks in, the Responses API's events out, each with its ``sequence_number``.

    One output item is open at a time, as OpenAI streams them: reasoning (from
    ``reasoning_content``, orchestrate mode's progress), then the message's text, then
    each function call in turn; a new kind closes the item before it. ``response``
    holds the whole answer once :meth:`finish` or :meth:`fail` has run.
    """

    def __init__(self, response: Response) -> None:
        self.response = response
        self._sequence = 0
        self._open: OutputItem | None = None
        self._calls: dict[int, FunctionToolCall] = {}
        self._finish_reason: str | None = None
        self._usage: CompletionUsage | None = None

    def start(self) -> list[StreamEvent]:
        return [self.whole("response.created"), self.whole("response.in_progress")]

    def chunk(self, chunk: ChatCompletionChunk) -> list[StreamEvent]:
        """The events one chunk makes."""
        if chunk.usage is not None:
            self._usage = chunk.usage
        events: list[StreamEvent] = []
        for choice in chunk.choices[:1]:
            delta = choice.delta
            if delta.reasoning_content:
                events += self._reasoning(delta.reasoning_content)
            if delta.content:
                events += self._text(delta.content)
            for call in delta.tool_calls or ():
                events += self._call(call.index, call.id, call.function)
            if choice.finish_reason is not None:
                self._finish_reason = choice.finish_reason
        return events

    def finish(self) -> list[StreamEvent]:
        """Every open item closed, then ``response.completed`` (or ``.incomplete``)."""
        events = self._close()
        _finish(self.response, self._finish_reason, self._usage)
        done = (
            "response.completed" if self.response.status == "completed" else "response.incomplete"
        )
        return [*events, self.whole(done)]

    def fail(self, code: str | None, message: str, param: str | None) -> list[StreamEvent]:
        """``error``, then ``response.failed``: the stream broke off."""
        error = ErrorEvent(
            type="error", sequence_number=self._next(), code=code, message=message, param=param
        )
        self.response.status = "failed"
        # the response's error takes OpenAI's codes only; the event keeps toolgraph's own
        self.response.error = ResponseError(code="server_error", message=message)
        return [error, self.whole("response.failed")]

    def _next(self) -> int:
        number = self._sequence
        self._sequence += 1
        return number

    def whole(self, kind: str) -> ResponseEvent:
        """An event carrying the whole response as it stands."""
        # a copy: the events already written must not change as the response grows
        snapshot = self.response.model_copy(deep=True)
        return ResponseEvent(type=kind, sequence_number=self._next(), response=snapshot)

    def _index(self) -> int:
        return len(self.response.output) - 1

    def _add(self, item: OutputItem) -> list[StreamEvent]:
        events = self._close()
        self.response.output.append(item)
        self._open = item
        added = OutputItemEvent(
            type="response.output_item.added",
            sequence_number=self._next(),
            output_index=self._index(),
            item=item.model_copy(deep=True),
        )
        return [*events, added]

    def _reasoning(self, delta: str) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        item = self._open
        if not isinstance(item, ReasoningItem):
            item = ReasoningItem(id=new_id("rs"), summary=[], status="in_progress")
            events += self._add(item)
            item.summary.append(SummaryText(text=""))
            events.append(self._summary_part("response.reasoning_summary_part.added", item))
        item.summary[0].text += delta
        events.append(
            SummaryTextDeltaEvent(
                type="response.reasoning_summary_text.delta",
                sequence_number=self._next(),
                item_id=item.id,
                output_index=self._index(),
                delta=delta,
            )
        )
        return events

    def _summary_part(self, kind: str, item: ReasoningItem) -> SummaryPartEvent:
        return SummaryPartEvent(
            type=kind,
            sequence_number=self._next(),
            item_id=item.id,
            output_index=self._index(),
            part=item.summary[0].model_copy(),
        )

    def _text(self, delta: str) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        item = self._open
        if not isinstance(item, OutputMessage):
            item = OutputMessage(id=new_id("msg"), status="in_progress", content=[])
            events += self._add(item)
            item.content.append(OutputText(text=""))
            events.append(self._content_part("response.content_part.added", item))
        part = item.content[0]
        assert isinstance(part, OutputText)
        part.text += delta
        events.append(
            TextDeltaEvent(
                type="response.output_text.delta",
                sequence_number=self._next(),
                item_id=item.id,
                output_index=self._index(),
                delta=delta,
            )
        )
        return events

    def _content_part(self, kind: str, item: OutputMessage) -> ContentPartEvent:
        return ContentPartEvent(
            type=kind,
            sequence_number=self._next(),
            item_id=item.id,
            output_index=self._index(),
            part=item.content[0].model_copy(),
        )

    def _call(self, index: int, call_id: str | None, function: Any) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        item = self._calls.get(index)
        if item is None:
            name = function.name if function is not None and function.name else ""
            item = FunctionToolCall(
                id=new_id("fc"), call_id=call_id or "", name=name, status="in_progress"
            )
            self._calls[index] = item
            events += self._add(item)
        delta = function.arguments if function is not None and function.arguments else ""
        if not delta:
            return events
        item.arguments += delta
        events.append(
            ArgumentsDeltaEvent(
                type="response.function_call_arguments.delta",
                sequence_number=self._next(),
                item_id=item.id,
                output_index=self.response.output.index(item),
                delta=delta,
            )
        )
        return events

    def _close(self) -> list[StreamEvent]:
        """The open item's closing events (none when nothing is open)."""
        item, self._open = self._open, None
        if item is None:
            return []
        events: list[StreamEvent] = []
        if isinstance(item, ReasoningItem):
            events += self._close_reasoning(item)
        elif isinstance(item, OutputMessage):
            events += self._close_text(item)
        else:
            events.append(
                ArgumentsDoneEvent(
                    type="response.function_call_arguments.done",
                    sequence_number=self._next(),
                    item_id=item.id,
                    output_index=self._index(),
                    name=item.name,
                    arguments=item.arguments,
                )
            )
        item.status = "completed"
        done = OutputItemEvent(
            type="response.output_item.done",
            sequence_number=self._next(),
            output_index=self._index(),
            item=item.model_copy(deep=True),
        )
        return [*events, done]

    def _close_reasoning(self, item: ReasoningItem) -> list[StreamEvent]:
        text_done = SummaryTextDoneEvent(
            type="response.reasoning_summary_text.done",
            sequence_number=self._next(),
            item_id=item.id,
            output_index=self._index(),
            text=item.summary[0].text,
        )
        return [text_done, self._summary_part("response.reasoning_summary_part.done", item)]

    def _close_text(self, item: OutputMessage) -> list[StreamEvent]:
        part = item.content[0]
        assert isinstance(part, OutputText)
        text_done = TextDoneEvent(
            type="response.output_text.done",
            sequence_number=self._next(),
            item_id=item.id,
            output_index=self._index(),
            text=part.text,
        )
        return [text_done, self._content_part("response.content_part.done", item)]
