"""A stream of chat chunks as the Responses API's typed events, numbered in order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from proxy.protocol.chat import ChatCompletionChunk, CompletionUsage
from proxy.protocol.responses import (
    ArgumentsDeltaEvent,
    ArgumentsDoneEvent,
    ContentPartEvent,
    ErrorEvent,
    FunctionToolCall,
    OutputItem,
    OutputItemEvent,
    OutputMessage,
    OutputText,
    ReasoningItem,
    Response,
    ResponseError,
    ResponseEvent,
    StreamEvent,
    SummaryPartEvent,
    SummaryText,
    SummaryTextDeltaEvent,
    SummaryTextDoneEvent,
    TextDeltaEvent,
    TextDoneEvent,
)
from proxy.responses_api.translation.response import (
    deferred_names,
    finish_response,
    function_call,
    new_id,
)


class EventTranslator:
    """Chat chunks in, the Responses API's events out, each with its ``sequence_number``.

    One output item is open at a time, as OpenAI streams them: reasoning (from
    ``reasoning_content``, orchestrate mode's progress), then the message's text, then
    each function call in turn; a new kind closes the item before it. ``response``
    holds the whole answer once :meth:`finish` or :meth:`fail` has run.
    """

    def __init__(self, response: Response) -> None:
        self.response = response
        self._deferred = deferred_names(response)
        self._sequence = 0
        self._open: OutputItem | None = None
        self._calls: dict[int, FunctionToolCall] = {}
        self._finish_reason: str | None = None
        self._usage: CompletionUsage | None = None

    def start(self) -> list[StreamEvent]:
        return [self.whole("response.created"), self.whole("response.in_progress")]

    def done_items(self, items: Sequence[OutputItem]) -> list[StreamEvent]:
        """Items that are whole before the answer streams (a hosted tool search's):
        each added and done at once."""
        events: list[StreamEvent] = []
        for item in items:
            events += self._add(item)
            self._open = None
            events.append(
                OutputItemEvent(
                    type="response.output_item.done",
                    sequence_number=self._next(),
                    output_index=self._index(),
                    item=item.model_copy(deep=True),
                )
            )
        return events

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
        finish_response(self.response, self._finish_reason, self._usage)
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
            item = function_call(call_id or "", name, self._deferred, status="in_progress")
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
        elif isinstance(item, FunctionToolCall):  # a tool search's items are never left open
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
