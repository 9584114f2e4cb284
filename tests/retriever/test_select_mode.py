"""Select mode through the proxy, driven by the official openai SDK with 300 tools."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from testing.fake_upstream import FakeToolCall, FakeUpstream, Script
from tests.conftest import ServerThread, StartProxy, closed_after_test
from tests.retriever.client_tools import client_tools, visa_tool

SELECT = {"toolgraph": {"mode": "select", "top_k": 4}}


def sdk(server: ServerThread) -> openai.OpenAI:
    return closed_after_test(
        openai.OpenAI(base_url=f"{server.url}/v1", api_key="sk-client", max_retries=0, timeout=60)
    )


def user(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


def forwarded(upstream: FakeUpstream) -> list[str]:
    body = upstream.requests[-1].body
    assert "toolgraph" not in body
    return [tool["function"]["name"] for tool in body["tools"]]


@pytest.fixture
def proxy(start_proxy: StartProxy) -> ServerThread:
    return start_proxy(upstream_api_key="sk-upstream")


@pytest.fixture
def client(proxy: ServerThread) -> Iterator[openai.OpenAI]:
    with sdk(proxy) as client:
        yield client


def selected_tools(proxy: ServerThread) -> dict[str, float]:
    """toolgraph_selected_tools_total of select mode by kind, as /metrics shows it now."""
    text = httpx.get(f"{proxy.url}/metrics", timeout=10).text
    counts = {"offered": 0.0, "injected": 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if (
                sample.name == "toolgraph_selected_tools_total"
                and sample.labels["mode"] == "select"
            ):
                counts[sample.labels["kind"]] = sample.value
    return counts


def test_the_upstream_sees_the_few_tools_and_the_client_gets_its_call(
    client: openai.OpenAI, proxy: ServerThread, upstream: FakeUpstream
) -> None:
    upstream.enqueue(Script(tool_calls=(FakeToolCall("get_weather_forecast", '{"city": "Oslo"}'),)))
    before = selected_tools(proxy)
    completion = client.chat.completions.create(
        model="gpt-x",
        messages=user("Will it snow in Oslo on Friday?"),
        tools=client_tools(),
        extra_body=SELECT,
    )
    names = forwarded(upstream)
    assert 1 <= len(names) <= 4
    assert "get_weather_forecast" in names
    assert selected_tools(proxy) == {
        "offered": before["offered"] + len(client_tools()),
        "injected": before["injected"] + len(names),
    }
    call = completion.choices[0].message.tool_calls[0]  # type: ignore[index]
    assert call.function.name == "get_weather_forecast"  # type: ignore[union-attr]
    assert completion.choices[0].finish_reason == "tool_calls"


def test_streaming_in_select_mode(
    client: openai.OpenAI, proxy: ServerThread, upstream: FakeUpstream
) -> None:
    upstream.enqueue(Script(tool_calls=(FakeToolCall("send_sms", '{"to": "+4712345678"}'),)))
    stream = client.chat.completions.create(
        model="gpt-x",
        messages=user("text my sister that I'm running late"),
        tools=client_tools(),
        stream=True,
        extra_body=SELECT,
    )
    names = [
        call.function.name
        for chunk in stream
        for call in (chunk.choices[0].delta.tool_calls or [] if chunk.choices else [])
        if call.function and call.function.name
    ]
    assert names == ["send_sms"]
    assert "send_sms" in forwarded(upstream)
    assert len(forwarded(upstream)) <= 4


def test_the_mode_header_selects_too(
    client: openai.OpenAI, proxy: ServerThread, upstream: FakeUpstream
) -> None:
    client.chat.completions.create(
        model="gpt-x",
        messages=user("what's the mortgage payment on 300k over 25 years"),
        tools=client_tools(),
        extra_headers={"x-toolgraph-mode": "select"},
    )
    names = forwarded(upstream)
    assert "calculate_mortgage" in names
    assert len(names) <= 8  # retriever.select_top_k


def test_the_configured_default_mode_selects_a_request_that_names_none(
    start_proxy: StartProxy, upstream: FakeUpstream
) -> None:
    # Nothing in the body changes but its tools: the client's own bytes must not go.
    server = start_proxy(upstream_api_key="sk-upstream", default_mode="select")
    with sdk(server) as client:
        client.chat.completions.create(
            model="gpt-x",
            messages=user("what's the mortgage payment on 300k over 25 years"),
            tools=client_tools(),
        )
    names = forwarded(upstream)
    assert "calculate_mortgage" in names
    assert len(names) <= 8  # retriever.select_top_k


def test_passthrough_forwards_every_tool(
    client: openai.OpenAI, proxy: ServerThread, upstream: FakeUpstream
) -> None:
    client.chat.completions.create(model="gpt-x", messages=user("hi"), tools=client_tools())
    assert len(forwarded(upstream)) == 300


def test_a_trimmed_tool_named_by_tool_choice_is_kept(
    client: openai.OpenAI, proxy: ServerThread, upstream: FakeUpstream
) -> None:
    client.chat.completions.create(
        model="gpt-x",
        messages=user("Will it snow in Oslo on Friday?"),
        tools=client_tools(),
        tool_choice={"type": "function", "function": {"name": "roll_dice"}},
        extra_body=SELECT,
    )
    assert "roll_dice" in forwarded(upstream)
    assert upstream.requests[-1].body["tool_choice"]["function"]["name"] == "roll_dice"


def test_enums_are_trimmed_and_stay_valid(
    client: openai.OpenAI, proxy: ServerThread, upstream: FakeUpstream
) -> None:
    client.chat.completions.create(
        model="gpt-x",
        messages=user("Do I need a visa to visit Japan for a holiday?"),
        tools=[*client_tools(), visa_tool()],
        extra_body=SELECT,
    )
    tools = upstream.requests[-1].body["tools"]
    visa = next(t for t in tools if t["function"]["name"] == "check_visa_rules")
    enum = visa["function"]["parameters"]["properties"]["country"]["enum"]
    assert "Japan" in enum
    assert "Austria" in enum  # the default
    assert len(enum) < 32


def test_a_threshold_nothing_passes_still_forwards_tools(
    client: openai.OpenAI, proxy: ServerThread, upstream: FakeUpstream
) -> None:
    client.chat.completions.create(
        model="gpt-x",
        messages=user("qwzx"),
        tools=client_tools(),
        extra_body={"toolgraph": {"mode": "select", "threshold": 1.0}},
    )
    assert len(forwarded(upstream)) >= 1


def test_the_same_tools_next_turn_hit_the_embedding_cache(
    client: openai.OpenAI, proxy: ServerThread, upstream: FakeUpstream
) -> None:
    client.chat.completions.create(
        model="gpt-x",
        messages=user("book a flight to Rome"),
        tools=client_tools(),
        extra_body=SELECT,
    )
    hits, misses = _lookups(proxy)
    client.chat.completions.create(
        model="gpt-x",
        messages=user("and a hotel room there"),
        tools=client_tools(),
        extra_body=SELECT,
    )
    hits_after, misses_after = _lookups(proxy)
    assert hits_after - hits >= 300  # every tool of the second turn
    assert misses_after - misses == 1  # its query only


def _lookups(proxy: ServerThread) -> tuple[float, float]:
    # Counters are per process and the tests' proxies share one: compare before and after.
    text = httpx.get(f"{proxy.url}/metrics").text
    series = 'toolgraph_cache_lookups_total{{cache="embedding",result="{}"}}'
    return _counter(text, series.format("hit")), _counter(text, series.format("miss"))


def _counter(text: str, series: str) -> float:
    match = re.search(re.escape(series) + r" ([0-9.e+]+)", text)
    return float(match.group(1)) if match else 0.0


def _error(client: openai.OpenAI, **body: Any) -> openai.BadRequestError:
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="gpt-x", messages=user("hi"), **body)
    return info.value


def test_select_mode_without_tools_is_refused(
    client: openai.OpenAI, upstream: FakeUpstream
) -> None:
    for tools in ([], None):
        error = (
            _error(client, tools=tools, extra_body=SELECT)
            if tools is not None
            else _error(client, extra_body=SELECT)
        )
        assert error.param == "tools"
        assert error.code == "missing_tools"
    assert upstream.requests == []


@pytest.mark.parametrize(
    ("tools", "param", "words"),
    [
        (
            [*client_tools()[:3], client_tools()[1]],
            "tools.[3].function.name",
            "both named",
        ),
        (
            [{"type": "function", "function": {"name": "f", "parameters": {"type": "string"}}}],
            "tools.[0].function.parameters",
            "type 'object'",
        ),
        (
            [{"type": "function", "function": {"name": "has space"}}],
            "tools.[0].function.name",
            "1-64 characters",
        ),
    ],
)
def test_bad_tools_are_a_400_naming_the_tool(
    client: openai.OpenAI, upstream: FakeUpstream, tools: list[Any], param: str, words: str
) -> None:
    error = _error(client, tools=tools, extra_body=SELECT)
    assert error.param == param
    assert words in error.message
    assert error.code == "invalid_tools"
    assert upstream.requests == []


def test_tool_choice_naming_no_tool_is_refused(
    client: openai.OpenAI, upstream: FakeUpstream
) -> None:
    error = _error(
        client,
        tools=client_tools(),
        tool_choice={"type": "function", "function": {"name": "nope"}},
        extra_body=SELECT,
    )
    assert error.param == "tool_choice"


def test_bad_select_options_are_refused(client: openai.OpenAI) -> None:
    error = _error(
        client, tools=client_tools(), extra_body={"toolgraph": {"mode": "select", "top_k": 0}}
    )
    assert error.param == "toolgraph.top_k"
    error = _error(client, tools=client_tools(), extra_headers={"x-toolgraph-mode": "nonsense"})
    assert error.param == "toolgraph.mode"


def deferred(tools: list[Any]) -> list[Any]:
    return [{**tool, "defer_loading": True} for tool in tools]


def test_tools_not_deferred_always_go_and_deferred_ones_only_when_needed(
    client: openai.OpenAI, upstream: FakeUpstream
) -> None:
    always, rest = client_tools()[-2:], client_tools()[:-2]  # two medical tools always go
    upstream.enqueue(Script(text="ok"))
    client.chat.completions.create(
        model="gpt-x",
        messages=user("Will it snow in Oslo on Friday?"),
        tools=[*always, *deferred(rest)],
        extra_body=SELECT,
    )
    tools = upstream.requests[-1].body["tools"]
    assert tools[:2] == always
    assert 3 <= len(tools) <= 6  # the two, then at most top_k deferred ones
    assert "get_weather_forecast" in [t["function"]["name"] for t in tools[2:]]
    assert not any("defer_loading" in t for t in tools)


def test_tool_choice_may_name_a_tool_that_always_goes(
    client: openai.OpenAI, upstream: FakeUpstream
) -> None:
    always, rest = client_tools()[-1:], client_tools()[:-1]
    name = always[0]["function"]["name"]
    upstream.enqueue(Script(text="ok"))
    client.chat.completions.create(
        model="gpt-x",
        messages=user("Will it snow in Oslo on Friday?"),
        tools=[*always, *deferred(rest)],
        tool_choice={"type": "function", "function": {"name": name}},
        extra_body=SELECT,
    )
    body = upstream.requests[-1].body
    assert body["tools"][0] == always[0]
    assert body["tool_choice"] == {"type": "function", "function": {"name": name}}


def test_a_conversation_keeps_its_loaded_tools_as_its_prefix(
    client: openai.OpenAI, upstream: FakeUpstream
) -> None:
    first = [{"role": "system", "content": "You help travellers."}, *user("Will it rain in Rome?")]
    upstream.enqueue(Script(text="Yes."), Script(text="Yes."), Script(text="Here."))
    usages = [
        client.chat.completions.create(
            model="gpt-x", messages=messages, tools=client_tools(), extra_body=SELECT
        ).usage
        for messages in (first, first)
    ]
    one, again = (json.dumps(upstream.requests[i].body["tools"]) for i in (-2, -1))
    assert one == again  # nothing new: the same tools, in the same order, key for key
    # The upstream served the repeated prompt from its cache, and said so.
    assert usages[1] is not None
    assert usages[1].prompt_tokens_details is not None
    assert usages[1].prompt_tokens_details.cached_tokens == usages[1].prompt_tokens
    later = [*first, {"role": "assistant", "content": "Yes."}, *user("Do I need a visa for Peru?")]
    usage = client.chat.completions.create(
        model="gpt-x", messages=later, tools=client_tools(), extra_body=SELECT
    ).usage
    before = upstream.requests[-2].body["tools"]
    after = upstream.requests[-1].body["tools"]
    assert after[: len(before)] == before
    assert len(after) > len(before)  # the visa question loaded something new, at the end
    assert usage is not None
    assert usage.prompt_tokens_details is not None
    assert 0 < usage.prompt_tokens_details.cached_tokens < usage.prompt_tokens
