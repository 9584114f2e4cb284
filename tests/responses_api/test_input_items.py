"""``GET /v1/responses/{id}/input_items`` through the SDK's
``client.responses.input_items.list``: the stored conversation a response was made
from, paged, each client seeing only its own, in process and in Redis; relayed to an
upstream that speaks the Responses API for the responses it keeps."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from testing.fake_upstream import FakeToolCall, FakeUpstream, Script
from tests.conftest import StartProxy
from tests.responses_api.test_translate import WEATHER, sdk


@pytest.fixture(params=["memory", "redis"])
def store_settings(request: pytest.FixtureRequest) -> dict[str, Any]:
    if request.param == "memory":
        return {}
    return {"redis_url": request.getfixturevalue("redis_server")}


def test_the_input_items_are_the_conversation_the_response_continues(
    start_proxy: StartProxy, upstream: FakeUpstream, store_settings: dict[str, Any]
) -> None:
    client = sdk(start_proxy(**store_settings))
    upstream.enqueue(
        Script(tool_calls=(FakeToolCall("get_weather", '{"city":"Oslo"}', "call_7"),)),
        Script(text="Cold in Oslo."),
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

    newest_first = client.responses.input_items.list(second.id)
    oldest_first = client.responses.input_items.list(second.id, order="asc")

    assert [item.type for item in oldest_first.data] == [
        "message",  # the first request's input; its instructions are not an item
        "function_call",  # the first response's output
        "function_call_output",
    ]
    question, call, result = oldest_first.data
    assert question.model_dump(include={"role", "content"}, exclude_none=True) == {
        "role": "user",
        "content": [{"type": "input_text", "text": "Weather in Oslo?"}],
    }
    assert call.id == first.output[0].id
    assert (getattr(call, "call_id", None), getattr(result, "output", None)) == ("call_7", "-5C")
    assert [item.id for item in newest_first.data] == [item.id for item in oldest_first.data][::-1]
    assert newest_first.has_more is False
    (only,) = client.responses.input_items.list(first.id).data
    assert only.id == question.id  # the same item, listed under either response


def test_pages_follow_after_to_the_end(
    start_proxy: StartProxy, upstream: FakeUpstream, store_settings: dict[str, Any]
) -> None:
    client = sdk(start_proxy(**store_settings))
    said = [f"turn {n}" for n in range(5)]
    conversation: Any = [
        {"role": "user" if n % 2 == 0 else "assistant", "content": text}
        for n, text in enumerate(said)
    ]
    created = client.responses.create(model="gpt-x", input=conversation)

    first_page = client.responses.input_items.list(created.id, limit=2, order="asc")
    every = list(client.responses.input_items.list(created.id, limit=2, order="asc"))

    assert first_page.has_more is True
    ends = first_page.to_dict()  # the page's own fields, which the SDK's type leaves out
    assert [item.id for item in first_page.data] == [ends["first_id"], ends["last_id"]]
    assert [item.model_dump()["content"][0]["text"] for item in every] == said
    assert len({item.id for item in every}) == 5
    assert every[1].model_dump()["content"][0]["type"] == "output_text"  # the assistant's
    last_two = client.responses.input_items.list(created.id, limit=2, after=every[2].id)
    assert [item.id for item in last_two.data] == [every[1].id, every[0].id]  # newest first
    assert last_two.has_more is False


def test_another_clients_items_are_unknown(
    start_proxy: StartProxy, upstream: FakeUpstream, store_settings: dict[str, Any]
) -> None:
    proxy = start_proxy(**store_settings)
    mine = sdk(proxy, key="sk-alice").responses.create(model="gpt-x", input="secret")

    with pytest.raises(openai.NotFoundError):
        sdk(proxy, key="sk-mallory").responses.input_items.list(mine.id)
    assert len(sdk(proxy, key="sk-alice").responses.input_items.list(mine.id).data) == 1


@pytest.mark.parametrize(
    ("query", "param"),
    [({"limit": 0}, "limit"), ({"limit": 101}, "limit"), ({"after": "msg_nope"}, "after")],
)
def test_a_bad_page_is_a_400_naming_the_parameter(
    start_proxy: StartProxy, upstream: FakeUpstream, query: dict[str, Any], param: str
) -> None:
    client = sdk(start_proxy())
    created = client.responses.create(model="gpt-x", input="hello")

    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.input_items.list(created.id, **query)
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["param"] == param


def test_a_bad_order_is_a_400(start_proxy: StartProxy, upstream: FakeUpstream) -> None:
    client = sdk(start_proxy())
    created = client.responses.create(model="gpt-x", input="hello")

    with pytest.raises(openai.BadRequestError) as caught:
        client.get(
            f"/responses/{created.id}/input_items",
            cast_to=object,
            options={"params": {"order": "sideways"}},
        )
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["param"] == "order"


def test_a_native_upstreams_items_are_asked_of_it(
    start_proxy: StartProxy, upstream: FakeUpstream
) -> None:
    upstream.speaks_responses = True
    client = sdk(start_proxy(upstream_responses="native"))
    created = client.responses.create(model="gpt-x", input="hello")

    listed = client.responses.input_items.list(created.id, limit=3)

    assert created.id.startswith("resp_fake")  # the upstream's, not toolgraph's
    assert listed.data == []  # what the fake upstream answers
    assert upstream.requests[-1].path == f"/v1/responses/{created.id}/input_items?limit=3"
    with pytest.raises(openai.NotFoundError):
        client.responses.input_items.list("resp_unknown")
