"""Auth, request ids, /v1/models, /healthz, /readyz and /metrics."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from testing.fake_upstream import FakeUpstream, Script
from tests.conftest import ServerThread, free_port
from tests.proxy.test_chat_passthrough import UPSTREAM_KEY, sdk, user

MASTER = "tg-master-key-0123456789"


@pytest.fixture
def guarded(start_proxy: Any) -> ServerThread:
    server: ServerThread = start_proxy(master_key=MASTER, upstream_api_key=UPSTREAM_KEY)
    return server


def test_missing_key_is_401_in_openai_shape(guarded: ServerThread) -> None:
    response = httpx.post(f"{guarded.url}/v1/chat/completions", json={}, timeout=10)
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "authentication_error"
    assert response.json()["error"]["code"] == "invalid_api_key"


def test_wrong_key_raises_the_sdks_authentication_error(
    guarded: ServerThread, upstream: FakeUpstream
) -> None:
    with pytest.raises(openai.AuthenticationError):
        sdk(guarded, key="tg-wrong").chat.completions.create(model="m", messages=user("x"))
    with pytest.raises(openai.AuthenticationError):
        sdk(guarded, key="tg-wrong").models.list()
    assert upstream.requests == []


def test_master_key_opens_the_api_and_is_never_forwarded(
    guarded: ServerThread, upstream: FakeUpstream
) -> None:
    completion = sdk(guarded, key=MASTER).chat.completions.create(model="m", messages=user("hi"))
    assert completion.choices[0].message.content == "You said: hi"
    assert upstream.requests[-1].headers["authorization"] == f"Bearer {UPSTREAM_KEY}"


def test_probes_and_metrics_need_no_key(guarded: ServerThread) -> None:
    for path in ("/healthz", "/readyz", "/metrics"):
        assert httpx.get(f"{guarded.url}{path}", timeout=10).status_code == 200


def test_without_keys_the_clients_own_key_goes_upstream(
    start_proxy: Any, upstream: FakeUpstream
) -> None:
    server = start_proxy()
    sdk(server, key="sk-clients-own").chat.completions.create(model="m", messages=user("x"))
    assert upstream.requests[-1].headers["authorization"] == "Bearer sk-clients-own"


def test_every_response_has_a_request_id_and_the_added_time(proxy: ServerThread) -> None:
    mine = httpx.post(
        f"{proxy.url}/v1/chat/completions",
        json={"model": "m", "messages": user("x")},
        headers={"x-request-id": "client-abc-123"},
        timeout=10,
    )
    assert mine.headers["x-request-id"] == "client-abc-123"
    assert float(mine.headers["x-toolgraph-overhead-ms"]) >= 0
    fresh = httpx.get(f"{proxy.url}/nowhere", headers={"x-request-id": "bad id\t!"}, timeout=10)
    assert uuid.UUID(fresh.headers["x-request-id"]).version == 4
    raw = sdk(proxy).chat.completions.with_raw_response.create(model="m", messages=user("x"))
    assert uuid.UUID(raw.headers["x-request-id"]).version == 4


def test_models_lists_the_routing_table(start_proxy: Any) -> None:
    server = start_proxy(
        models=[
            {"name": "fast", "litellm_model": "openai/gpt-4o-mini"},
            {"name": "local", "litellm_model": "hosted_vllm/meta-llama/Llama-3.1-8B"},
        ]
    )
    client = sdk(server)
    assert [model.id for model in client.models.list()] == ["fast", "local"]
    assert client.models.retrieve("local").owned_by == "toolgraph"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("nope")


def test_routes_rename_the_model_for_the_upstream(start_proxy: Any, upstream: FakeUpstream) -> None:
    server = start_proxy(
        models=[{"name": "local", "litellm_model": "hosted_vllm/meta-llama/Llama-3.1-8B",
                 "base_url": upstream.base_url}]
    )  # fmt: skip
    sdk(server).chat.completions.create(model="local", messages=user("x"))
    assert upstream.requests[-1].body["model"] == "meta-llama/Llama-3.1-8B"


def test_readyz_checks_the_configured_redis(start_proxy: Any, redis_server: str) -> None:
    ready = start_proxy(redis_url=redis_server)
    response = httpx.get(f"{ready.url}/readyz", timeout=10)
    assert response.status_code == 200
    assert response.json()["checks"] == {"redis": "ok", "catalog": "ok"}

    broken = start_proxy(redis_url=f"redis://127.0.0.1:{free_port()}/0")
    response = httpx.get(f"{broken.url}/readyz", timeout=10)
    assert response.status_code == 503
    assert response.json()["checks"]["redis"].startswith("failed")
    assert httpx.get(f"{broken.url}/healthz", timeout=10).status_code == 200


def test_readyz_fails_when_qdrant_is_unreachable(start_proxy: Any) -> None:
    server = start_proxy(qdrant_url=f"http://127.0.0.1:{free_port()}")
    response = httpx.get(f"{server.url}/readyz", timeout=10)
    assert response.status_code == 503
    assert response.json()["checks"]["qdrant"].startswith("failed")


def scrape(server: ServerThread) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def test_metrics_count_requests_tokens_and_first_tokens(
    proxy: ServerThread, upstream: FakeUpstream
) -> None:
    route = "/v1/chat/completions"
    before = scrape(proxy)
    client = sdk(proxy)
    client.chat.completions.create(model="gpt-m", messages=user("one two"))
    upstream.enqueue(Script(text="a b c"))
    list(
        client.chat.completions.create(
            model="gpt-m", messages=user("x"), stream=True, stream_options={"include_usage": True}
        )
    )
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="gpt-m", messages=[])
    after = scrape(proxy)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    ok = {"route": route, "mode": "passthrough", "status": "200"}
    assert grew("toolgraph_http_requests_total", **ok) == 2
    assert grew("toolgraph_http_requests_total", route=route, mode="none", status="400") == 1
    assert grew("toolgraph_http_request_duration_seconds_count", **ok) == 2
    # gpt-m is in no route: its label is other (see the test below).
    assert (
        grew("toolgraph_time_to_first_token_seconds_count", mode="passthrough", model="other") == 1
    )
    assert grew("toolgraph_upstream_tokens_total", model="other", kind="completion") == 4 + 3
    assert (
        grew("toolgraph_upstream_request_duration_seconds_count", model="other", outcome="200") == 2
    )
    assert grew("toolgraph_proxy_overhead_seconds_count", mode="passthrough") == 2
    assert value(after, "toolgraph_http_requests_in_flight", route=route) == 0


def test_metrics_label_models_by_the_routing_table_never_by_the_clients_name(
    start_proxy: Any, upstream: FakeUpstream
) -> None:
    # A label per name a client sends let 3,000 streams grow /metrics from 36 KB to 8 MB.
    server = start_proxy(
        models=[{"name": "known", "litellm_model": "openai/gpt-k", "base_url": upstream.base_url}]
    )
    client = sdk(server)
    before = scrape(server)
    names = ["known", *(f"random-{uuid.uuid4().hex}" for _ in range(5))]
    for name in names:
        upstream.enqueue(Script(text="a b"))
        stream = client.chat.completions.create(
            model=name, messages=user("x"), stream=True, stream_options={"include_usage": True}
        )
        list(stream)
    after = scrape(server)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert "random-" not in httpx.get(f"{server.url}/metrics", timeout=10).text
    first_token = "toolgraph_time_to_first_token_seconds_count"
    assert grew(first_token, mode="passthrough", model="known") == 1
    assert grew(first_token, mode="passthrough", model="other") == 5
    assert grew("toolgraph_upstream_tokens_total", model="known", kind="prompt") > 0
    assert grew("toolgraph_upstream_tokens_total", model="other", kind="prompt") > 0
    upstream_wait = "toolgraph_upstream_request_duration_seconds_count"
    assert grew(upstream_wait, model="other", outcome="200") == 5


def test_readyz_checks_the_configured_neo4j(start_proxy: Any, bolt_uri: str) -> None:
    ready = start_proxy(neo4j_uri=bolt_uri)
    response = httpx.get(f"{ready.url}/readyz", timeout=30)
    assert response.json()["checks"] == {"neo4j": "ok", "catalog": "ok"}
    assert response.status_code == 200

    broken = start_proxy(neo4j_uri=f"bolt://neo4j:pw@127.0.0.1:{free_port()}")
    response = httpx.get(f"{broken.url}/readyz", timeout=30)
    assert response.status_code == 503
    assert response.json()["checks"]["neo4j"].startswith("failed")


def test_only_uuid_request_ids_go_upstream(proxy: ServerThread, upstream: FakeUpstream) -> None:
    # llama.cpp's server answers a bare 400 to any other X-Request-Id.
    client = sdk(proxy)
    client.chat.completions.create(
        model="m", messages=user("x"), extra_headers={"x-request-id": "mine-1"}
    )
    assert "x-request-id" not in upstream.requests[-1].headers
    reply = client.chat.completions.with_raw_response.create(model="m", messages=user("x"))
    assert upstream.requests[-1].headers["x-request-id"] == reply.headers["x-request-id"]
