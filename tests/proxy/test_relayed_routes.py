"""Embeddings, completions and moderations through toolgraph, driven by the official
openai SDK; and every route again without its ``/v1`` prefix."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from testing.fake_endpoints import embedding_of
from testing.fake_upstream import FakeUpstream, Script
from tests.conftest import ServerThread, closed_after_test
from tests.proxy.test_chat_passthrough import UPSTREAM_KEY, sdk, user
from tests.proxy.test_service_endpoints import scrape, value


def test_embeddings_come_back_as_the_upstream_wrote_them(
    proxy: ServerThread, upstream: FakeUpstream
) -> None:
    result = sdk(proxy).embeddings.create(model="text-embed", input=["one", "two words"])

    assert [item.embedding for item in result.data] == [
        pytest.approx(embedding_of("one")),
        pytest.approx(embedding_of("two words")),
    ]
    assert result.model == "text-embed"
    assert result.usage.prompt_tokens == 3
    sent = upstream.requests[-1]
    assert sent.path == "/v1/embeddings"
    assert sent.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
    # The SDK asks for base64 unless told otherwise; the body went as the client sent it.
    assert sent.body == {
        "model": "text-embed",
        "input": ["one", "two words"],
        "encoding_format": "base64",
    }


def test_embeddings_keep_their_model_where_chat_has_a_configured_one(
    start_proxy: Any, upstream: FakeUpstream
) -> None:
    server = start_proxy(
        upstream_model="chat-model",
        models=[
            {"name": "embedder", "litellm_model": "openai/text-embedding-3-small",
             "base_url": upstream.base_url},
        ],
    )  # fmt: skip
    client = sdk(server)
    client.embeddings.create(model="my-embedder", input="x", encoding_format="float")
    assert upstream.requests[-1].body["model"] == "my-embedder"
    client.embeddings.create(model="embedder", input="x", encoding_format="float")
    assert upstream.requests[-1].body["model"] == "text-embedding-3-small"


def test_completions_answer_plain_and_streamed(start_proxy: Any, upstream: FakeUpstream) -> None:
    client = sdk(start_proxy(upstream_model="served-model"))

    completion = client.completions.create(model="anything", prompt="hello there")
    assert completion.choices[0].text == "You said: hello there"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None
    assert completion.usage.prompt_tokens == 2
    assert upstream.requests[-1].path == "/v1/completions"
    assert upstream.requests[-1].body["model"] == "served-model"  # as chat routes it

    chunks = list(
        client.completions.create(
            model="anything",
            prompt="streamed please",
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert "".join(c.choices[0].text for c in chunks if c.choices) == "You said: streamed please"
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 4


def test_moderations_relay_each_inputs_result(proxy: ServerThread, upstream: FakeUpstream) -> None:
    result = sdk(proxy).moderations.create(input=["a calm day", "attack at dawn"])

    assert [r.flagged for r in result.results] == [False, True]
    assert result.results[1].categories.violence is True
    assert upstream.requests[-1].path == "/v1/moderations"
    assert "model" not in upstream.requests[-1].body


def test_relayed_routes_answer_errors_in_openai_shape(
    proxy: ServerThread, upstream: FakeUpstream
) -> None:
    client = sdk(proxy)
    with pytest.raises(openai.BadRequestError) as bad:
        client.embeddings.create(model="m", input=None)  # type: ignore[arg-type]
    assert (bad.value.param, bad.value.code) == ("input", "invalid_type")
    missing = httpx.post(f"{proxy.url}/v1/completions", json={"model": "m"}, timeout=10)
    assert missing.status_code == 400
    assert missing.json()["error"] == {
        "message": "Missing required parameter: 'prompt'.",
        "type": "invalid_request_error",
        "param": "prompt",
        "code": "missing_required_parameter",
    }
    assert upstream.requests == []  # refused before it went anywhere

    error = {"message": "slow down", "type": "requests", "param": None, "code": "rate_limit"}
    upstream.enqueue(Script(status=429, error=error, headers={"retry-after": "7"}))
    with pytest.raises(openai.RateLimitError) as limited:
        client.moderations.create(input="x")
    assert limited.value.code == "rate_limit"
    assert limited.value.response.headers["retry-after"] == "7"

    upstream.enqueue(Script(drop_after_events=2))
    with pytest.raises(openai.APIError, match="broke off while streaming"):
        list(client.completions.create(model="m", prompt="a b c d", stream=True))


def test_relayed_routes_need_the_master_key(start_proxy: Any, upstream: FakeUpstream) -> None:
    server = start_proxy(master_key="tg-master-key-0123456789")
    with pytest.raises(openai.AuthenticationError):
        sdk(server, key="wrong").embeddings.create(model="m", input="x")
    with pytest.raises(openai.AuthenticationError):
        sdk(server, key="wrong").completions.create(model="m", prompt="x")
    assert upstream.requests == []
    sdk(server, key="tg-master-key-0123456789").moderations.create(input="x")
    assert "authorization" not in upstream.requests[-1].headers  # the master key stays here


@pytest.mark.extra("providers")
def test_a_route_through_litellm_is_refused_by_name(start_proxy: Any) -> None:
    server = start_proxy(models=[{"name": "claude", "litellm_model": "anthropic/claude-x"}])
    with pytest.raises(openai.BadRequestError) as refused:
        sdk(server).embeddings.create(model="claude", input="x")
    assert refused.value.code == "model_not_supported"


def test_relayed_routes_count_in_metrics_and_carry_request_ids(
    proxy: ServerThread, upstream: FakeUpstream
) -> None:
    before = scrape(proxy)
    raw = sdk(proxy).embeddings.with_raw_response.create(model="m", input="x")
    reply = httpx.post(f"{proxy.url}/embeddings", json={"model": "m", "input": "y"}, timeout=10)
    after = scrape(proxy)

    assert reply.status_code == 200
    assert upstream.requests[-1].headers["x-request-id"] == reply.headers["x-request-id"]
    assert raw.headers["x-request-id"] != reply.headers["x-request-id"]
    labels = {"route": "/v1/embeddings", "mode": "passthrough", "status": "200"}
    total = "toolgraph_http_requests_total"
    assert value(after, total, **labels) - value(before, total, **labels) == 2
    tokens = "toolgraph_upstream_tokens_total"
    grew = value(after, tokens, model="other", kind="prompt")
    assert grew - value(before, tokens, model="other", kind="prompt") == 2


def test_every_route_is_served_without_the_v1_prefix(
    start_proxy: Any, upstream: FakeUpstream
) -> None:
    server = start_proxy(models=[{"name": "fast", "litellm_model": "openai/gpt-4o-mini",
                                  "base_url": upstream.base_url}])  # fmt: skip
    client = closed_after_test(openai.OpenAI(base_url=server.url, api_key="k", max_retries=0))

    chat = client.chat.completions.create(model="fast", messages=user("hi"))
    assert chat.choices[0].message.content == "You said: hi"
    assert client.completions.create(model="fast", prompt="hi").choices[0].text == "You said: hi"
    assert len(client.embeddings.create(model="e", input="hi").data) == 1
    assert client.moderations.create(input="hi").results[0].flagged is False
    assert [model.id for model in client.models.list()] == ["fast"]
    assert client.models.retrieve("fast").id == "fast"
    assert [r.path for r in upstream.requests] == [
        "/v1/chat/completions",
        "/v1/completions",
        "/v1/embeddings",
        "/v1/moderations",
    ]
    missing = httpx.get(f"{server.url}/nowhere", timeout=10)
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "unknown_url"


def test_a_large_answers_tokens_are_counted_without_decoding_it(
    proxy: ServerThread, upstream: FakeUpstream
) -> None:
    before = scrape(proxy)
    inputs = [f"word{i}" for i in range(3000)]  # about 400 KB of floats back
    result = sdk(proxy).embeddings.create(model="m", input=inputs, encoding_format="float")
    after = scrape(proxy)

    assert len(result.data) == 3000
    tokens = "toolgraph_upstream_tokens_total"
    grew = value(after, tokens, model="other", kind="prompt")
    assert grew - value(before, tokens, model="other", kind="prompt") == 3000


def test_relayed_routes_keep_the_body_limits(start_proxy: Any, upstream: FakeUpstream) -> None:
    server = start_proxy(limits={"max_body_bytes": 1000, "max_json_depth": 8})
    client = sdk(server)
    with pytest.raises(openai.APIStatusError) as large:
        client.embeddings.create(model="m", input="x" * 2000)
    assert large.value.status_code == 413
    with pytest.raises(openai.BadRequestError) as deep:
        client.moderations.create(input=[[[[[[[[["x"]]]]]]]]])  # type: ignore[list-item]
    assert deep.value.code == "json_too_deep"
    assert upstream.requests == []
