"""A route through litellm's translation still looks like OpenAI to the SDK."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from testing.fake_upstream import FakeToolCall, FakeUpstream, Script
from tests.conftest import ServerThread
from tests.proxy.test_chat_passthrough import TOOLS, sdk, user


@pytest.fixture
def translated(
    start_proxy: Any, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> ServerThread:
    monkeypatch.setenv("TEST_ROUTE_KEY", "sk-litellm-route-key")
    server: ServerThread = start_proxy(
        models=[
            {
                "name": "via-litellm",
                "litellm_model": "openai/fake-model",
                "base_url": upstream.base_url,
                "api": "litellm",
                "api_key_env": "TEST_ROUTE_KEY",
            }
        ],
    )
    return server


def test_whole_answer_through_litellm(translated: ServerThread, upstream: FakeUpstream) -> None:
    completion = sdk(translated).chat.completions.create(
        model="via-litellm", messages=user("bonjour")
    )
    assert completion.choices[0].message.content == "You said: bonjour"
    assert completion.usage is not None
    assert completion.usage.completion_tokens == 3
    assert upstream.requests[-1].body["model"] == "fake-model"
    assert upstream.requests[-1].headers["authorization"] == "Bearer sk-litellm-route-key"


def test_stream_with_tool_calls_through_litellm(
    translated: ServerThread, upstream: FakeUpstream
) -> None:
    upstream.enqueue(Script(tool_calls=(FakeToolCall("get_weather", '{"city": "Rome"}'),)))
    stream = sdk(translated).chat.completions.create(
        model="via-litellm",
        messages=user("weather"),
        tools=TOOLS,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    arguments = "".join(
        call.function.arguments or ""
        for chunk in chunks
        if chunk.choices
        for call in chunk.choices[0].delta.tool_calls or []
        if call.function
    )
    assert arguments == '{"city": "Rome"}'
    assert len({chunk.id for chunk in chunks}) == 1
    assert chunks[-1].usage is not None


def test_upstream_error_through_litellm_keeps_status(
    translated: ServerThread, upstream: FakeUpstream
) -> None:
    upstream.enqueue(
        Script(status=400, error={"message": "bad thing here", "type": "invalid_request_error"})
    )
    with pytest.raises(openai.BadRequestError, match="bad thing here"):
        sdk(translated).chat.completions.create(model="via-litellm", messages=user("x"))
