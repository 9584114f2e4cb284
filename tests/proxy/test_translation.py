"""The Responses API in chat completions' terms and back: the one translation."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.errors import InvalidRequest
from proxy.protocol.chat import ChatCompletion, ChatCompletionChunk
from proxy.protocol.responses import parse_responses_request
from proxy.responses_api.translation.events import EventTranslator
from proxy.responses_api.translation.request import chat_body, conversation, history_messages
from proxy.responses_api.translation.response import skeleton, to_response


def body_for(request: dict[str, Any], history: list[Any] | None = None) -> dict[str, Any]:
    parsed = parse_responses_request({"model": "m", **request})
    return chat_body(parsed, conversation(parsed, history or []))


def test_content_parts_become_chat_parts() -> None:
    image = {"type": "input_image", "image_url": "https://x/cat.png", "detail": "low"}
    sent = body_for(
        {
            "input": [
                {"role": "developer", "content": [{"type": "input_text", "text": "Be kind."}]},
                {"role": "user", "content": [{"type": "input_text", "text": "What is it?"}, image]},
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "A cat.", "annotations": []}],
                },
            ]
        }
    )

    assert sent["messages"] == [
        {"role": "system", "content": "Be kind."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is it?"},
                {"type": "image_url", "image_url": {"url": "https://x/cat.png", "detail": "low"}},
            ],
        },
        {"role": "assistant", "content": "A cat."},
    ]


def test_options_map_to_their_chat_names() -> None:
    sent = body_for(
        {
            "input": "hi",
            "tool_choice": {"type": "function", "name": "f"},
            "parallel_tool_calls": False,
            "reasoning": {"effort": "low"},
            "text": {"format": {"type": "json_object"}},
            "temperature": 0.5,
            "metadata": {"a": "b"},
            "store": False,
        }
    )

    assert sent["tool_choice"] == {"type": "function", "function": {"name": "f"}}
    assert sent["parallel_tool_calls"] is False
    assert sent["reasoning_effort"] == "low"
    assert sent["response_format"] == {"type": "json_object"}
    assert sent["temperature"] == 0.5
    assert "metadata" not in sent
    assert "store" not in sent


def test_parallel_calls_join_one_assistant_message() -> None:
    calls = [
        {"type": "function_call", "call_id": f"c{n}", "name": "f", "arguments": "{}"}
        for n in (1, 2)
    ]
    outputs = [{"type": "function_call_output", "call_id": f"c{n}", "output": "ok"} for n in (1, 2)]

    sent = body_for({"input": [{"role": "user", "content": "go"}, *calls, *outputs]})

    assistant = sent["messages"][1]
    assert [call["id"] for call in assistant["tool_calls"]] == ["c1", "c2"]
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "tool", "tool"]


def test_a_call_output_may_answer_a_call_of_the_history() -> None:
    history = [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "old", "type": "function"}]}
    ]
    sent = body_for(
        {"input": [{"type": "function_call_output", "call_id": "old", "output": "ok"}]}, history
    )
    assert sent["messages"][-1] == {"role": "tool", "tool_call_id": "old", "content": "ok"}


@pytest.mark.parametrize(
    ("request_", "code"),
    [
        (
            {"input": [{"role": "user", "content": [{"type": "input_audio"}]}]},
            "unsupported_content_type",
        ),
        ({"input": "hi", "tool_choice": {"type": "web_search"}}, "unsupported_tool_choice"),
        ({"input": "hi", "tools": [{"type": "web_search"}]}, "invalid_value"),
        ({"input": [{"type": "item_reference", "id": "x"}]}, "unsupported_item_type"),
        ({"input": 5}, "invalid_type"),
        ({"input": "hi", "background": True}, "unsupported_parameter"),
        ({"input": "hi", "conversation": "conv_1"}, "unsupported_parameter"),
    ],
)
def test_what_chat_cannot_take_is_a_400(request_: dict[str, Any], code: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        body_for(request_)
    assert caught.value.code == code


def test_a_completion_becomes_a_response() -> None:
    request = parse_responses_request({"model": "m", "input": "hi", "metadata": {"k": "v"}})
    completion = ChatCompletion.model_validate(
        {
            "choices": [
                {
                    "message": {
                        "role": "assistant",
                        "content": "Hello",
                        "reasoning_content": "thinking",
                        "tool_calls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "f", "arguments": "{}"},
                            }
                        ],
                    },
                    "finish_reason": "content_filter",
                }
            ],
            "usage": {
                "prompt_tokens": 3,
                "completion_tokens": 4,
                "total_tokens": 7,
                "prompt_tokens_details": {"cached_tokens": 2},
            },
        }
    )

    response = to_response(completion, skeleton(request))

    assert [item.type for item in response.output] == ["reasoning", "message", "function_call"]
    assert response.output_text() == "Hello"
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "content_filter"
    assert response.usage is not None
    assert response.usage.input_tokens_details.cached_tokens == 2
    assert response.metadata == {"k": "v"}
    # what a follow-up reads of it (previous_response_id): one assistant message
    assert history_messages(response.model_dump(mode="json")["output"]) == [
        {
            "role": "assistant",
            "content": "Hello",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        }
    ]


def chunk(delta: dict[str, Any], finish: str | None = None) -> ChatCompletionChunk:
    return ChatCompletionChunk.model_validate(
        {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    )


def test_a_new_kind_of_delta_closes_the_open_item() -> None:
    request = parse_responses_request({"model": "m", "input": "hi"})
    translator = EventTranslator(skeleton(request))
    events = translator.start()
    events += translator.chunk(chunk({"reasoning_content": "planning…"}))
    events += translator.chunk(chunk({"content": "Hi"}))
    call = {"index": 0, "id": "c1", "function": {"name": "f", "arguments": "{}"}}
    events += translator.chunk(chunk({"tool_calls": [call]}, "tool_calls"))
    events += translator.finish()

    assert [event.type for event in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [event.sequence_number for event in events] == list(range(len(events)))
    created = events[0].model_dump()
    assert created["response"]["output"] == []  # not changed by what came later
    assert created["response"]["status"] == "in_progress"
    assert [item.type for item in translator.response.output] == [
        "reasoning",
        "message",
        "function_call",
    ]
