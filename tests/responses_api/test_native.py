"""``/v1/responses`` to an upstream that speaks the Responses API itself: relayed,
bytes unchanged, where ``upstream_responses`` says so or ``auto`` finds it does."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from testing.fake_upstream import FakeToolCall, FakeUpstream, Script
from tests.conftest import StartProxy
from tests.responses_api.test_translate import WEATHER, sdk
from tests.retriever.client_tools import client_tools

HOSTED: Any = [{"type": "web_search"}]  # a tool translation refuses: proof of a relay


def paths(upstream: FakeUpstream) -> list[str]:
    return [request.path for request in upstream.requests]


def test_auto_finds_a_responses_upstream_once_and_relays_to_it(
    start_proxy: StartProxy, upstream: FakeUpstream
) -> None:
    upstream.speaks_responses = True
    client = sdk(start_proxy())

    first = client.responses.create(model="gpt-x", input="hello", tools=HOSTED)
    second = client.responses.create(model="gpt-x", input="again", metadata={"k": "v"})

    assert first.id.startswith("resp_fake")  # the upstream's own answer
    assert first.output_text == "You said: hello"
    assert second.output_text == "You said: again"
    assert paths(upstream) == ["/v1/responses"] * 3  # the question, then two requests
    question, relayed, _ = (request.body for request in upstream.requests)
    assert question == {"model": "gpt-x"}
    assert relayed == {"model": "gpt-x", "input": "hello", "tools": HOSTED}


def test_auto_finds_a_chat_only_upstream_once_and_translates(
    start_proxy: StartProxy, upstream: FakeUpstream
) -> None:
    client = sdk(start_proxy())

    first = client.responses.create(model="gpt-x", input="hello")
    second = client.responses.create(model="gpt-x", input="again")

    assert first.id.startswith("resp_")
    assert not first.id.startswith("resp_fake")
    assert second.output_text == "You said: again"
    assert paths(upstream) == ["/v1/responses", "/v1/chat/completions", "/v1/chat/completions"]


def test_native_streams_the_upstreams_events_unchanged(
    start_proxy: StartProxy, upstream: FakeUpstream
) -> None:
    upstream.speaks_responses = True
    upstream.enqueue(Script(text="one two three"))
    client = sdk(start_proxy(upstream_responses="native"))

    with client.responses.stream(
        model="gpt-x", input="count", extra_body={"toolgraph": {"mode": "passthrough"}}
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()

    assert final.id.startswith("resp_fake")
    assert final.output_text == "one two three"
    assert kinds[-1] == "response.completed"
    assert paths(upstream) == ["/v1/responses"]  # no question asked: native was said
    assert "toolgraph" not in upstream.requests[0].body  # toolgraph's own field stays here


def test_translate_never_asks(start_proxy: StartProxy, upstream: FakeUpstream) -> None:
    upstream.speaks_responses = True
    client = sdk(start_proxy(upstream_responses="translate"))

    response = client.responses.create(model="gpt-x", input="hello")

    assert not response.id.startswith("resp_fake")
    assert paths(upstream) == ["/v1/chat/completions"]


def test_select_mode_relays_to_a_responses_upstream_with_the_tools_cut(
    start_proxy: StartProxy, upstream: FakeUpstream
) -> None:
    upstream.speaks_responses = True
    tools: Any = [{"type": "function", **t["function"]} for t in client_tools()]
    # run alone, this request loads the embedding model: over 20 s at load 14
    client = sdk(start_proxy(upstream_responses="native"), timeout=180)

    response = client.responses.create(
        model="gpt-x",
        input="Will it snow in Oslo on Friday?",
        tools=[*HOSTED, *tools],
        extra_body={"toolgraph": {"mode": "select", "top_k": 4}},
    )

    assert response.id.startswith("resp_fake")  # the upstream's own answer
    assert paths(upstream) == ["/v1/responses"]
    sent = upstream.requests[-1].body
    assert "toolgraph" not in sent
    assert sent["tools"][0] == HOSTED[0]  # not a function: not select mode's to cut
    names = [tool["name"] for tool in sent["tools"][1:]]
    assert 1 <= len(names) <= 4
    assert "get_weather_forecast" in names
    assert all(tool in tools for tool in sent["tools"][1:])  # as the client wrote them


def test_function_calling_over_two_turns_with_previous_response_id_is_the_upstreams(
    start_proxy: StartProxy, upstream: FakeUpstream
) -> None:
    upstream.speaks_responses = True
    upstream.enqueue(
        Script(tool_calls=(FakeToolCall("get_weather", '{"city":"Oslo"}', "call_7"),)),
        Script(text="Cold in Oslo."),
    )
    client = sdk(start_proxy(upstream_responses="native"))

    first = client.responses.create(model="gpt-x", input="Weather in Oslo?", tools=[WEATHER])
    (call,) = first.output
    result: Any = [{"type": "function_call_output", "call_id": "call_7", "output": "-5C"}]
    second = client.responses.create(
        model="gpt-x", previous_response_id=first.id, input=result, tools=[WEATHER]
    )

    assert (call.type, getattr(call, "name", None)) == ("function_call", "get_weather")
    assert second.output_text == "Cold in Oslo."
    relayed = upstream.requests[-1].body  # the conversation is the upstream's to keep
    assert (relayed["previous_response_id"], relayed["input"]) == (first.id, result)


def test_get_and_delete_reach_the_upstreams_own_store(
    start_proxy: StartProxy, upstream: FakeUpstream
) -> None:
    upstream.speaks_responses = True
    client = sdk(start_proxy())
    created = client.responses.create(model="gpt-x", input="kept upstream")

    assert client.responses.retrieve(created.id).output_text == "You said: kept upstream"
    client.responses.delete(created.id)

    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(created.id)
    assert upstream.stored_responses == {}


def test_an_upstreams_own_400_comes_back_as_it_sent_it(
    start_proxy: StartProxy, upstream: FakeUpstream
) -> None:
    upstream.speaks_responses = True
    client = sdk(start_proxy(upstream_responses="native"))

    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="gpt-x", input=[], extra_body={"input": None})

    assert isinstance(caught.value.body, dict)
    assert caught.value.body["message"] == "Missing required parameter: 'input'."


def test_a_route_of_the_routing_table_has_its_own_say(
    start_proxy: StartProxy, upstream: FakeUpstream
) -> None:
    upstream.speaks_responses = True
    route = {
        "name": "relayed",
        "litellm_model": "openai/fake-model",
        "base_url": upstream.base_url,
        "responses": "native",
    }
    client = sdk(start_proxy(upstream_responses="translate", models=[route]))

    relayed = client.responses.create(model="relayed", input="one")
    translated = client.responses.create(model="gpt-x", input="two")

    assert relayed.id.startswith("resp_fake")
    assert not translated.id.startswith("resp_fake")
    assert paths(upstream) == ["/v1/responses", "/v1/chat/completions"]
    assert upstream.requests[0].body["model"] == "fake-model"  # the route's own name for it


def test_json_schema_output_reaches_a_responses_upstream_as_the_client_wrote_it(
    start_proxy: StartProxy, upstream: FakeUpstream
) -> None:
    upstream.speaks_responses = True
    upstream.enqueue(Script(text='{"city": "Paris"}'))
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    }
    text: Any = {
        "format": {"type": "json_schema", "name": "place", "schema": schema, "strict": True}
    }
    client = sdk(start_proxy(upstream_responses="native"))

    response = client.responses.create(
        model="gpt-x", input="Where is the Eiffel tower?", text=text, max_output_tokens=50
    )

    assert response.id.startswith("resp_fake")
    assert json.loads(response.output_text) == {"city": "Paris"}
    (relayed,) = (request.body for request in upstream.requests)
    assert (relayed["text"], relayed["max_output_tokens"]) == (text, 50)  # not response_format
