"""LlamaIndex's ``OpenAILike`` with its defaults against toolgraph: it is no chat model
unless told, so ``complete``, ``stream_complete`` and even ``chat`` go to
``/v1/completions``."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from llama_index.core.llms import ChatMessage
from llama_index.llms.openai_like import OpenAILike

from testing.fake_upstream import FakeUpstream
from tests.conftest import ServerThread


@pytest.fixture
async def llm(proxy: ServerThread) -> AsyncIterator[OpenAILike]:
    """The defaults but for where toolgraph is; its HTTP clients closed after the test
    (one left to the garbage collector is a ResourceWarning, and warnings are errors)."""
    with httpx.Client() as client:
        async with httpx.AsyncClient() as async_client:
            yield OpenAILike(
                model="local-model",
                api_base=f"{proxy.url}/v1",
                api_key="sk-client",
                http_client=client,
                async_http_client=async_client,
            )


def test_openai_like_completes_through_the_completions_route(
    llm: OpenAILike, upstream: FakeUpstream
) -> None:
    assert llm.complete("hello there").text == "You said: hello there"
    assert upstream.requests[-1].path == "/v1/completions"
    assert upstream.requests[-1].body["prompt"] == "hello there"


def test_openai_like_streams_and_chats_through_it_too(
    llm: OpenAILike, upstream: FakeUpstream
) -> None:
    pieces = [piece.delta for piece in llm.stream_complete("a streamed answer")]
    assert "".join(p for p in pieces if p) == "You said: a streamed answer"
    assert upstream.requests[-1].body["stream"] is True

    answer = llm.chat([ChatMessage(role="user", content="hi")])
    assert answer.message.content is not None
    assert "hi" in answer.message.content
    assert [r.path for r in upstream.requests] == ["/v1/completions", "/v1/completions"]


async def test_openai_like_completes_asynchronously(
    llm: OpenAILike, upstream: FakeUpstream
) -> None:
    answer = await llm.acomplete("async hello")
    assert answer.text == "You said: async hello"
    assert upstream.requests[-1].path == "/v1/completions"
