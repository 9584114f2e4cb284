"""``/v1/responses`` streamed through toolgraph from a chat completions upstream: the
typed events and their ``sequence_number``s, read by the official SDK."""

from __future__ import annotations

import json
import threading
from typing import Any

from testing.fake_upstream import FakeToolCall, FakeUpstream, Script
from tests.conftest import ServerThread
from tests.responses_api.test_translate import WEATHER, chat_requests, sdk


def test_text_streams_as_typed_events(proxy: ServerThread, upstream: FakeUpstream) -> None:
    upstream.enqueue(Script(text="one two three"))

    with sdk(proxy).responses.stream(model="gpt-x", input="count") as stream:
        events = list(stream)
        final = stream.get_final_response()

    assert [event.type for event in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [event.sequence_number for event in events] == list(range(len(events)))
    deltas = [event.delta for event in events if event.type == "response.output_text.delta"]
    assert deltas == ["one ", "two ", "three"]
    assert final.output_text == "one two three"
    assert final.status == "completed"
    assert final.usage is not None
    assert final.usage.output_tokens == 3
    (sent,) = chat_requests(upstream)
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}


def test_function_call_arguments_stream(proxy: ServerThread, upstream: FakeUpstream) -> None:
    arguments = '{"city":"Paris, France"}'
    upstream.enqueue(Script(tool_calls=(FakeToolCall("get_weather", arguments, "call_9"),)))

    with sdk(proxy).responses.stream(model="gpt-x", input="Weather?", tools=[WEATHER]) as stream:
        events = list(stream)
        final = stream.get_final_response()

    kinds = [event.type for event in events]
    assert kinds[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert kinds[-3:] == [
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    pieces = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    assert "".join(pieces) == arguments
    assert len(pieces) > 1
    (call,) = final.output
    assert call.type == "function_call"
    assert (call.name, call.call_id, json.loads(call.arguments)) == (
        "get_weather",
        "call_9",
        {"city": "Paris, France"},
    )


def test_a_stream_broken_upstream_ends_with_error_and_failed(
    proxy: ServerThread, upstream: FakeUpstream
) -> None:
    seen = threading.Event()
    upstream.enqueue(Script(text="one two three four", drop_after_events=3, drop_when=seen))
    client = sdk(proxy)

    events: list[Any] = []
    with client.responses.create(model="gpt-x", input="count", stream=True) as stream:
        for event in stream:
            events.append(event)
            if event.type == "response.output_text.delta":
                seen.set()  # the upstream breaks off only once text came through

    kinds = [event.type for event in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert "response.output_text.delta" in kinds
    assert kinds[-2:] == ["error", "response.failed"]
    assert events[-2].code == "upstream_unreachable"
    assert events[-1].response.status == "failed"
    assert events[-1].response.error.code == "server_error"
    assert [event.sequence_number for event in events] == list(range(len(events)))
