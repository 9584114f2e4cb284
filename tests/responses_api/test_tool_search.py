"""A hosted ``tool_search`` over deferred tools, for a chat-only upstream: toolgraph runs
the search with select mode and reports it in OpenAI's items, whole and streamed."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from openai.types.responses import (
    Response,
    ResponseStreamEvent,
    ResponseToolSearchCall,
    ResponseToolSearchOutputItem,
)
from pydantic import TypeAdapter

from testing.fake_upstream import FakeToolCall, FakeUpstream, Script
from tests.conftest import StartProxy
from tests.responses_api.test_modes import flat
from tests.responses_api.test_translate import chat_requests, sdk
from tests.retriever.client_tools import client_tools

ALWAYS = "archive_medical_appointment"  # not deferred: always goes
#: The SDK builds its models without checking them; these check the wire against its types.
EVENTS: TypeAdapter[ResponseStreamEvent] = TypeAdapter(ResponseStreamEvent)


def tools() -> list[Any]:
    found: list[Any] = [{"type": "tool_search"}]
    for tool in client_tools():
        spec = flat(tool)
        found.append(spec if spec["name"] == ALWAYS else {**spec, "defer_loading": True})
    return found


def test_the_search_loads_the_tools_the_question_needs_and_says_so(
    start_proxy: StartProxy, upstream: FakeUpstream
) -> None:
    upstream.enqueue(Script(tool_calls=(FakeToolCall("get_weather_forecast", '{"city":"Oslo"}'),)))
    client = sdk(start_proxy(), timeout=120)

    raw = client.responses.with_raw_response.create(
        model="gpt-x", input="Will it snow in Oslo on Friday?", tools=tools()
    )
    response = Response.model_validate_json(raw.http_response.text)

    (sent,) = chat_requests(upstream)
    names = [tool["function"]["name"] for tool in sent["tools"]]
    assert names[0] == ALWAYS
    assert "get_weather_forecast" in names[1:]
    assert len(names) < 20  # the deferred ones stay out unless found
    assert not any("defer_loading" in tool or tool["type"] != "function" for tool in sent["tools"])
    search, output, call = response.output
    assert isinstance(search, ResponseToolSearchCall)
    assert search.execution == "server"
    assert search.status == "completed"
    assert "Oslo" in str(search.arguments)
    assert isinstance(output, ResponseToolSearchOutputItem)
    assert output.call_id == search.call_id
    assert sorted(t.name for t in output.tools) == sorted(names[1:])  # type: ignore[union-attr]
    assert call.type == "function_call"
    assert call.name == "get_weather_forecast"
    assert call.namespace == "get_weather_forecast"  # OpenAI's shape for a deferred function


def test_the_stream_reports_the_search_before_the_answer(
    start_proxy: StartProxy, upstream: FakeUpstream
) -> None:
    upstream.enqueue(Script(text="It will snow."))
    client = sdk(start_proxy(), timeout=120)

    with client.responses.stream(
        model="gpt-x", input="Will it snow in Oslo on Friday?", tools=tools()
    ) as stream:
        added = [e.item.type for e in stream if e.type == "response.output_item.added"]
        final = stream.get_final_response()

    assert added == ["tool_search_call", "tool_search_output", "message"]
    assert [item.type for item in final.output] == added
    assert final.output_text == "It will snow."


def test_the_streamed_events_are_the_sdk_types(
    start_proxy: StartProxy, upstream: FakeUpstream
) -> None:
    upstream.enqueue(Script(tool_calls=(FakeToolCall("get_weather_forecast", '{"city":"Oslo"}'),)))
    client = sdk(start_proxy(), timeout=120)

    with client.responses.with_streaming_response.create(
        model="gpt-x", input="Will it snow in Oslo on Friday?", tools=tools(), stream=True
    ) as raw:
        data = [line[6:] for line in raw.iter_lines() if line.startswith("data: ")]
    events = [EVENTS.validate_python(json.loads(line)) for line in data]

    items = [event.item for event in events if event.type == "response.output_item.done"]
    search, output, call = items
    assert isinstance(search, ResponseToolSearchCall)
    assert isinstance(output, ResponseToolSearchOutputItem)
    assert output.call_id == search.call_id
    assert call.type == "function_call"
    assert call.namespace == "get_weather_forecast"
    assert events[-1].type == "response.completed"


def test_a_search_the_client_runs_needs_an_upstream_that_can(
    start_proxy: StartProxy, upstream: FakeUpstream
) -> None:
    client = sdk(start_proxy(), timeout=120)
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(
            model="gpt-x",
            input="hello",
            tools=[{"type": "tool_search", "execution": "client"}, *tools()[1:]],
        )
    assert caught.value.code == "unsupported_tool_search"
    assert chat_requests(upstream) == []
