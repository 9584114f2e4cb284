"""Stored responses: ``previous_response_id``, ``GET`` and ``DELETE /v1/responses/{id}``,
each client seeing only its own, in process and in Redis."""

from __future__ import annotations

import time
from typing import Any

import openai
import pytest

from testing.fake_upstream import FakeToolCall, FakeUpstream, Script
from tests.conftest import StartProxy
from tests.responses_api.test_translate import WEATHER, chat_requests, sdk


@pytest.fixture(params=["memory", "redis"])
def store_settings(request: pytest.FixtureRequest) -> dict[str, Any]:
    if request.param == "memory":
        return {}
    return {"redis_url": request.getfixturevalue("redis_server")}


def test_previous_response_id_continues_the_conversation(
    start_proxy: StartProxy, upstream: FakeUpstream, store_settings: dict[str, Any]
) -> None:
    client = sdk(start_proxy(**store_settings))
    upstream.enqueue(
        Script(tool_calls=(FakeToolCall("get_weather", '{"city":"Oslo"}', "call_7"),)),
        Script(text="Cold in Oslo."),
        Script(text="You asked about Oslo."),
    )

    first = client.responses.create(
        model="gpt-x", input="Weather in Oslo?", instructions="Be brief.", tools=[WEATHER]
    )
    second = client.responses.create(
        model="gpt-x",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": "call_7", "output": "-5C"}],
        tools=[WEATHER],
    )
    third = client.responses.create(
        model="gpt-x", previous_response_id=second.id, input="What did I ask?"
    )

    assert third.output_text == "You asked about Oslo."
    assert third.previous_response_id == second.id
    *_, last = chat_requests(upstream)
    assert [(m["role"], m.get("content")) for m in last["messages"]] == [
        ("user", "Weather in Oslo?"),  # the first instructions are not carried over
        ("assistant", None),
        ("tool", "-5C"),
        ("assistant", "Cold in Oslo."),
        ("user", "What did I ask?"),
    ]
    assert last["messages"][1]["tool_calls"][0]["id"] == "call_7"


def test_get_and_delete_a_stored_response(
    start_proxy: StartProxy, upstream: FakeUpstream, store_settings: dict[str, Any]
) -> None:
    client = sdk(start_proxy(**store_settings))
    created = client.responses.create(model="gpt-x", input="keep me")

    fetched = client.responses.retrieve(created.id)
    assert fetched.id == created.id
    assert fetched.output_text == "You said: keep me"

    client.responses.delete(created.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(created.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(created.id)


def test_store_false_keeps_nothing(start_proxy: StartProxy, upstream: FakeUpstream) -> None:
    client = sdk(start_proxy())
    created = client.responses.create(model="gpt-x", input="forget me", store=False)

    assert created.store is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(created.id)
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="gpt-x", input="and?", previous_response_id=created.id)
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["param"] == "previous_response_id"


def test_another_clients_response_is_unknown(
    start_proxy: StartProxy, upstream: FakeUpstream, store_settings: dict[str, Any]
) -> None:
    proxy = start_proxy(**store_settings)
    mine = sdk(proxy, key="sk-alice").responses.create(model="gpt-x", input="secret")
    other = sdk(proxy, key="sk-mallory")

    with pytest.raises(openai.BadRequestError) as caught:
        other.responses.create(model="gpt-x", input="hi", previous_response_id=mine.id)
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["code"] == "previous_response_not_found"
    with pytest.raises(openai.NotFoundError):
        other.responses.retrieve(mine.id)
    with pytest.raises(openai.NotFoundError):
        other.responses.delete(mine.id)
    assert sdk(proxy, key="sk-alice").responses.retrieve(mine.id).id == mine.id


def test_a_response_past_its_ttl_is_unknown(
    start_proxy: StartProxy, upstream: FakeUpstream, store_settings: dict[str, Any]
) -> None:
    client = sdk(start_proxy(responses={"store_ttl": 1}, **store_settings))
    created = client.responses.create(model="gpt-x", input="brief")

    time.sleep(1.5)  # past the TTL: a slower run only waits longer past it

    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="gpt-x", input="and?", previous_response_id=created.id)
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["code"] == "previous_response_not_found"
