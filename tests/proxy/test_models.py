"""GET /v1/models and /v1/models/{id} through the official SDK: the routing table's
names, else the upstream's own list."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from testing.fake_upstream import FakeUpstream, Script
from tests.conftest import ServerThread, closed_after_test, free_port
from tests.proxy.test_chat_passthrough import UPSTREAM_KEY, sdk


def model_calls(upstream: FakeUpstream) -> list[str]:
    return [r.path for r in upstream.requests if r.method == "GET"]


def test_without_a_routing_table_the_upstreams_own_list_is_listed(
    proxy: ServerThread, upstream: FakeUpstream
) -> None:
    upstream.models = ["gpt-a", "gpt-b"]
    client = sdk(proxy)

    listed = client.models.list()
    assert [(m.id, m.owned_by) for m in listed] == [("gpt-a", "fake"), ("gpt-b", "fake")]
    assert client.models.retrieve("gpt-b").id == "gpt-b"
    with pytest.raises(openai.NotFoundError) as missing:
        client.models.retrieve("gpt-c")
    assert missing.value.code == "model_not_found"
    assert model_calls(upstream) == ["/v1/models"]  # kept: asked once for all three
    assert upstream.requests[0].headers["authorization"] == f"Bearer {UPSTREAM_KEY}"


def test_the_configured_model_is_listed_first_and_retrieved_without_asking(
    start_proxy: Any, upstream: FakeUpstream
) -> None:
    upstream.models = ["gpt-a", "served"]
    client = sdk(start_proxy(upstream_model="served"))

    assert client.models.retrieve("served").owned_by == "toolgraph"
    assert model_calls(upstream) == []
    assert [m.id for m in client.models.list()] == ["served", "gpt-a"]


def test_the_clients_own_key_asks_for_its_own_list(
    start_proxy: Any, upstream: FakeUpstream
) -> None:
    server = start_proxy()
    upstream.models = ["for-one"]
    assert [m.id for m in sdk(server, key="sk-one").models.list()] == ["for-one"]
    upstream.models = ["for-two"]
    assert [m.id for m in sdk(server, key="sk-two").models.list()] == ["for-two"]
    assert [m.id for m in sdk(server, key="sk-one").models.list()] == ["for-one"]
    assert [r.headers["authorization"] for r in upstream.requests] == [
        "Bearer sk-one",
        "Bearer sk-two",
    ]


def test_the_upstreams_errors_come_back_in_openai_shape(
    start_proxy: Any, upstream: FakeUpstream
) -> None:
    client = sdk(start_proxy(upstream_api_key=UPSTREAM_KEY))
    error = {"message": "bad key", "type": "invalid_request_error", "param": None,
             "code": "invalid_api_key"}  # fmt: skip
    upstream.enqueue(Script(status=401, error=error))
    with pytest.raises(openai.AuthenticationError) as refused:
        client.models.list()
    assert refused.value.code == "invalid_api_key"
    upstream.models = [""]  # a model without a name: not OpenAI's shape
    with pytest.raises(openai.APIStatusError) as garbled:
        client.models.list()
    assert (garbled.value.status_code, garbled.value.code) == (502, "upstream_bad_models")
    upstream.models = ["fake-model"]
    assert [m.id for m in client.models.list()] == ["fake-model"]  # errors are not kept

    unreachable = sdk(start_proxy(upstream_base_url=f"http://127.0.0.1:{free_port()}/v1"))
    with pytest.raises(openai.APIStatusError) as gone:
        unreachable.models.list()
    assert gone.value.status_code == 502


def test_models_without_the_v1_prefix_and_with_a_routing_table(
    start_proxy: Any, upstream: FakeUpstream
) -> None:
    bare = start_proxy()
    client = closed_after_test(openai.OpenAI(base_url=bare.url, api_key="k", max_retries=0))
    assert [m.id for m in client.models.list()] == ["fake-model"]
    assert client.models.retrieve("fake-model").id == "fake-model"

    routed = sdk(start_proxy(models=[{"name": "fast", "litellm_model": "openai/gpt-4o-mini"}]))
    upstream.reset()
    assert [m.id for m in routed.models.list()] == ["fast"]
    assert model_calls(upstream) == []  # the table is the list
