"""Chat completions through toolgraph, driven by the official openai SDK."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import openai
import pytest

from testing.fake_upstream import FakeToolCall, FakeUpstream, Script
from tests.conftest import ServerThread, StartProxy, closed_after_test

UPSTREAM_KEY = "sk-upstream-secret-0123456789"

TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}},
        },
    },
]


def sdk(server: ServerThread | FakeUpstream, key: str = "sk-client") -> openai.OpenAI:
    base_url = server.base_url if isinstance(server, FakeUpstream) else f"{server.url}/v1"
    return closed_after_test(
        openai.OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=20)
    )


def user(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


def test_plain_answer_comes_back_as_the_upstream_wrote_it(
    proxy: ServerThread, upstream: FakeUpstream
) -> None:
    completion = sdk(proxy).chat.completions.create(model="gpt-x", messages=user("hello there"))

    assert completion.choices[0].message.content == "You said: hello there"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == "gpt-x"
    assert completion.usage is not None
    assert completion.usage.total_tokens > 0
    sent = upstream.requests[-1]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"


def test_unknown_fields_and_tool_fields_reach_the_upstream_untouched(
    proxy: ServerThread, upstream: FakeUpstream
) -> None:
    response_format = {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}
    sdk(proxy).chat.completions.create(
        model="gpt-x",
        messages=[
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
        ],
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        parallel_tool_calls=False,
        response_format=response_format,  # type: ignore[arg-type]
        temperature=0.25,
        extra_body={
            "vendor_knob": {"nested": [1, 2.5, None]},
            "toolgraph": {"mode": "passthrough"},
        },
    )

    body = upstream.requests[-1].body
    assert body["tools"] == TOOLS
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert body["parallel_tool_calls"] is False
    assert body["response_format"] == response_format
    assert body["temperature"] == 0.25
    assert body["vendor_knob"] == {"nested": [1, 2.5, None]}
    assert body["messages"][1]["content"] == [{"type": "text", "text": "weather?"}]
    assert "toolgraph" not in body


@pytest.mark.parametrize("stream", [False, True])
def test_integers_past_64_bits_reach_the_upstream_exactly_when_the_body_is_re_encoded(
    proxy: ServerThread, upstream: FakeUpstream, stream: bool
) -> None:
    seed = 123456789012345678901234567890
    knob = {"limit": -(10**40), "ratio": 1.5e-7}
    with sdk(proxy) as client:
        answer = client.chat.completions.create(
            model="gpt-x",
            messages=user("hello"),
            seed=seed,
            stream=stream,
            extra_body={"vendor_knob": knob, "toolgraph": {"mode": "passthrough"}},
        )
        if isinstance(answer, openai.Stream):
            list(answer)
    body = upstream.requests[-1].body
    assert "toolgraph" not in body  # re-encoded, not relayed as sent
    assert body["seed"] == seed
    assert body["vendor_knob"] == knob


def test_stream_keeps_openai_chunk_shape_and_ends_with_usage(
    proxy: ServerThread, upstream: FakeUpstream
) -> None:
    upstream.enqueue(Script(text="one two three four"))
    stream = sdk(proxy).chat.completions.create(
        model="gpt-x",
        messages=user("count"),
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)

    assert len({chunk.id for chunk in chunks}) == 1
    assert all(chunk.object == "chat.completion.chunk" for chunk in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "one two three four"
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 4
    assert [c.choices[0].finish_reason for c in chunks[:-1]][-1] == "stop"
    assert upstream.requests[-1].body["stream_options"] == {"include_usage": True}


def test_streamed_tool_calls_are_keyed_by_index(
    proxy: ServerThread, upstream: FakeUpstream
) -> None:
    calls = (
        FakeToolCall("get_weather", '{"city": "Paris, France"}'),
        FakeToolCall("get_time", '{"tz": "Europe/Paris"}'),
    )
    upstream.enqueue(Script(tool_calls=calls))
    stream = sdk(proxy).chat.completions.create(
        model="gpt-x", messages=user("weather and time"), tools=TOOLS, stream=True
    )
    names: dict[int, str] = {}
    arguments: dict[int, str] = {}
    finish = None
    for chunk in stream:
        for delta_call in chunk.choices[0].delta.tool_calls or []:
            if delta_call.function and delta_call.function.name:
                names[delta_call.index] = delta_call.function.name
            if delta_call.function and delta_call.function.arguments:
                arguments[delta_call.index] = (
                    arguments.get(delta_call.index, "") + delta_call.function.arguments
                )
        finish = chunk.choices[0].finish_reason or finish

    assert names == {0: "get_weather", 1: "get_time"}
    assert json.loads(arguments[0]) == {"city": "Paris, France"}
    assert json.loads(arguments[1]) == {"tz": "Europe/Paris"}
    assert finish == "tool_calls"


def test_tool_calls_in_a_whole_answer(proxy: ServerThread, upstream: FakeUpstream) -> None:
    upstream.enqueue(Script(tool_calls=(FakeToolCall("get_weather", '{"city": "Oslo"}'),)))
    completion = sdk(proxy).chat.completions.create(
        model="gpt-x", messages=user("weather"), tools=TOOLS
    )

    message = completion.choices[0].message
    assert message.content is None
    assert message.tool_calls is not None
    call = message.tool_calls[0]
    assert call.type == "function"
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Oslo"}
    assert completion.choices[0].finish_reason == "tool_calls"


@pytest.mark.parametrize("stream", [False, True])
def test_the_sdk_cannot_tell_toolgraph_from_the_upstream(
    proxy: ServerThread, upstream: FakeUpstream, stream: bool
) -> None:
    script = Script(text="alpha beta", tool_calls=(FakeToolCall("get_time", '{"tz": "UTC"}'),))
    seen = []
    for target in (upstream, proxy):
        upstream.enqueue(script)
        upstream.prompt_cache.clear()  # the second would find the first's prompt cached
        kwargs: dict[str, Any] = {"model": "gpt-x", "messages": user("hi"), "tools": TOOLS}
        if stream:
            kwargs |= {"stream": True, "stream_options": {"include_usage": True}}
            answer = [c.model_dump() for c in sdk(target).chat.completions.create(**kwargs)]
        else:
            answer = [sdk(target).chat.completions.create(**kwargs).model_dump()]
        seen.append([_without_identity(part) for part in answer])

    direct, proxied = seen
    assert proxied == direct


def _without_identity(value: Any) -> Any:
    """The payload with its per-request ids and timestamps blanked, at every depth."""
    if isinstance(value, dict):
        return {
            k: "-" if k in ("id", "created") else _without_identity(v) for k, v in value.items()
        }
    if isinstance(value, list):
        return [_without_identity(v) for v in value]
    return value


def test_stream_reaches_the_client_before_the_upstream_has_finished(
    start_proxy: Any, upstream: FakeUpstream
) -> None:
    # The upstream sends three events and then never finishes: the client must
    # still see them, and the stream must end with an error at the read timeout.
    server = start_proxy(timeouts={"upstream_read": 1.0})
    upstream.enqueue(Script(text="first second third", hang_after_events=3))
    stream = sdk(server).chat.completions.create(model="gpt-x", messages=user("x"), stream=True)
    chunks = iter(stream)
    received = [next(chunks).choices[0].delta.content for _ in range(3)]
    assert received == ["", "first ", "second "]
    with pytest.raises(openai.APIError, match="timed out while streaming"):
        next(chunks)


async def test_two_hundred_concurrent_streams_complete_in_order(
    start_proxy: StartProxy, upstream: FakeUpstream
) -> None:
    # 200 connects at once to a fake upstream that shares the test's cores: on a starved
    # machine the default 10 s connect bound failed one (a 504), which says nothing here.
    proxy = start_proxy(timeouts={"upstream_connect": 120.0})
    client = openai.AsyncOpenAI(
        base_url=f"{proxy.url}/v1",
        api_key="sk-client",
        max_retries=0,
        timeout=60,
        http_client=openai.DefaultAsyncHttpxClient(
            limits=httpx.Limits(max_connections=250, max_keepalive_connections=250)
        ),
    )

    async def one(i: int) -> tuple[str, str]:
        words = " ".join(f"s{i}w{j}" for j in range(20))
        stream = await client.chat.completions.create(
            model="gpt-x", messages=user(words), stream=True, stream_options={"include_usage": True}
        )
        text = ""
        last = None
        async for chunk in stream:
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
            last = chunk
        assert last is not None
        assert last.choices == []
        assert last.usage is not None
        return text, f"You said: {words}"

    try:
        results = await asyncio.gather(*(one(i) for i in range(200)))
    finally:
        await client.close()
    assert all(got == want for got, want in results)
    assert len(upstream.requests) == 200
