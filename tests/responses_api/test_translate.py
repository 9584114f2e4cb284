"""``/v1/responses`` through toolgraph to a chat completions upstream, driven by the
official openai SDK (``client.responses.create`` and ``client.responses.stream``)."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from testing.fake_upstream import FakeToolCall, FakeUpstream, Script
from tests.conftest import ServerThread, closed_after_test

WEATHER: Any = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
    "strict": True,
}


def sdk(server: ServerThread, key: str = "sk-client", timeout: float = 20) -> openai.OpenAI:
    return closed_after_test(
        openai.OpenAI(base_url=f"{server.url}/v1", api_key=key, max_retries=0, timeout=timeout)
    )


def chat_requests(upstream: FakeUpstream) -> list[Any]:
    return [r.body for r in upstream.requests if r.path.endswith("/chat/completions")]


def test_text_answer_is_a_response_with_usage(proxy: ServerThread, upstream: FakeUpstream) -> None:
    response = sdk(proxy).responses.create(
        model="gpt-x", input="hello there", instructions="Be brief.", metadata={"run": "1"}
    )

    assert response.output_text == "You said: hello there"
    assert response.status == "completed"
    assert response.id.startswith("resp_")
    assert response.model == "gpt-x"
    assert response.metadata == {"run": "1"}
    assert response.instructions == "Be brief."
    assert response.usage is not None
    assert response.usage.input_tokens > 0
    assert response.usage.output_tokens > 0
    assert response.usage.total_tokens == response.usage.input_tokens + response.usage.output_tokens
    (sent,) = chat_requests(upstream)
    assert sent["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hello there"},
    ]


def test_function_calling_over_two_turns(proxy: ServerThread, upstream: FakeUpstream) -> None:
    client = sdk(proxy)
    upstream.enqueue(
        Script(tool_calls=(FakeToolCall("get_weather", '{"city":"Paris"}', "call_1"),)),
        Script(text="It is sunny in Paris."),
    )
    question: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]

    first = client.responses.create(model="gpt-x", input=question, tools=[WEATHER])
    (call,) = [item for item in first.output if item.type == "function_call"]
    assert (call.name, call.call_id, json.loads(call.arguments)) == (
        "get_weather",
        "call_1",
        {"city": "Paris"},
    )
    second = client.responses.create(
        model="gpt-x",
        input=[
            *question,
            *[item.model_dump() for item in first.output],
            {"type": "function_call_output", "call_id": "call_1", "output": '{"sky":"sunny"}'},
        ],
        tools=[WEATHER],
    )

    assert second.output_text == "It is sunny in Paris."
    first_sent, second_sent = chat_requests(upstream)
    assert first_sent["tools"] == [
        {
            "type": "function",
            "function": {k: v for k, v in WEATHER.items() if k != "type"},
        }
    ]
    assert second_sent["messages"][1:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"sky":"sunny"}'},
    ]


def test_json_schema_output_goes_as_response_format(
    proxy: ServerThread, upstream: FakeUpstream
) -> None:
    upstream.enqueue(Script(text='{"city": "Paris"}'))
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    }

    response = sdk(proxy).responses.create(
        model="gpt-x",
        input="Where is the Eiffel tower?",
        text={"format": {"type": "json_schema", "name": "place", "schema": schema, "strict": True}},
        max_output_tokens=50,
    )

    assert json.loads(response.output_text) == {"city": "Paris"}
    assert response.text is not None
    assert response.text.format is not None
    assert response.text.format.type == "json_schema"
    (sent,) = chat_requests(upstream)
    assert sent["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "place", "schema": schema, "strict": True},
    }
    assert sent["max_completion_tokens"] == 50


def test_an_answer_cut_at_max_tokens_is_incomplete(
    proxy: ServerThread, upstream: FakeUpstream
) -> None:
    upstream.enqueue(Script(text="a long", finish_reason="length"))

    response = sdk(proxy).responses.create(model="gpt-x", input="hi", max_output_tokens=2)

    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"


@pytest.mark.parametrize(
    ("item", "param", "code"),
    [
        ({"type": "web_search_call", "id": "ws_1"}, "input.[0].type", "unsupported_item_type"),
        (
            {"type": "function_call_output", "call_id": "call_x", "output": "{}"},
            "input.[0].call_id",
            "unknown_call_id",
        ),
        ({"type": "message", "role": "user"}, "input.[0].content", "missing_required_parameter"),
    ],
)
def test_bad_input_items_are_400_in_openai_shape(
    proxy: ServerThread, upstream: FakeUpstream, item: Any, param: str, code: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        sdk(proxy).responses.create(model="gpt-x", input=[item])

    error = caught.value.body
    assert isinstance(error, dict)
    assert (error["param"], error["code"], error["type"]) == (
        param,
        code,
        "invalid_request_error",
    )
    assert chat_requests(upstream) == []


def test_too_many_input_items_is_a_400(start_proxy: Any, upstream: FakeUpstream) -> None:
    proxy = start_proxy(limits={"max_messages": 3})
    items: Any = [{"role": "user", "content": "hi"}] * 4

    with pytest.raises(openai.BadRequestError) as caught:
        sdk(proxy).responses.create(model="gpt-x", input=items)

    assert isinstance(caught.value.body, dict)
    assert caught.value.body["code"] == "too_many_input_items"


def test_upstream_errors_come_back_with_their_status(
    proxy: ServerThread, upstream: FakeUpstream
) -> None:
    upstream.enqueue(
        Script(status=429, error={"message": "slow down", "type": "rate_limit", "code": "rl"})
    )

    with pytest.raises(openai.RateLimitError) as caught:
        sdk(proxy).responses.create(model="gpt-x", input="hi")

    assert isinstance(caught.value.body, dict)
    assert caught.value.body["message"] == "slow down"


def test_the_route_is_served_without_the_v1_prefix(
    proxy: ServerThread, upstream: FakeUpstream
) -> None:
    client = closed_after_test(
        openai.OpenAI(base_url=proxy.url, api_key="sk-client", max_retries=0, timeout=20)
    )

    created = client.responses.create(model="gpt-x", input="no prefix")

    assert created.output_text == "You said: no prefix"
    assert client.responses.retrieve(created.id).id == created.id


def test_too_many_content_parts_is_a_400(start_proxy: Any, upstream: FakeUpstream) -> None:
    proxy = start_proxy(limits={"max_content_parts": 5})
    parts: Any = [{"type": "input_text", "text": "x"}] * 6

    with pytest.raises(openai.BadRequestError) as caught:
        sdk(proxy).responses.create(model="gpt-x", input=[{"role": "user", "content": parts}])

    error = caught.value.body
    assert isinstance(error, dict)
    assert (error["code"], error["param"]) == ("too_many_content_parts", "input[0].content")
    assert "limits.max_content_parts" in error["message"]
    assert chat_requests(upstream) == []
