"""Agent frameworks that speak the Responses API, run against toolgraph: the OpenAI
Agents SDK (``openai-agents``) and LangChain's ``ChatOpenAI(use_responses_api=True)``,
each with a chat-only upstream (translated) and a Responses upstream (relayed)."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from agents import Agent, OpenAIResponsesModel, RunConfig, Runner, ToolSearchTool, function_tool
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from testing.fake_upstream import FakeToolCall, FakeUpstream, Script
from tests.conftest import ServerThread, StartProxy


@pytest.fixture(params=["chat", "responses"])
def proxy(
    request: pytest.FixtureRequest, start_proxy: StartProxy, upstream: FakeUpstream
) -> ServerThread:
    upstream.speaks_responses = request.param == "responses"
    return start_proxy()


def sent(upstream: FakeUpstream) -> list[Any]:
    """What reached the upstream, the auto mode's question left out."""
    return [r.body for r in upstream.requests if r.body != {"model": "gpt-x"}]


def last_result(upstream: FakeUpstream, body: dict[str, Any]) -> dict[str, Any]:
    """The tool result a request ends with, in chat's shape whichever API carried it."""
    if not upstream.speaks_responses:
        result: dict[str, Any] = body["messages"][-1]
        return result
    item = body["input"][-1]
    assert item["type"] == "function_call_output"
    return {"role": "tool", "tool_call_id": item["call_id"], "content": item["output"]}


@function_tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


async def test_an_agents_sdk_agent_calls_its_function_tool(
    proxy: ServerThread, upstream: FakeUpstream
) -> None:
    upstream.enqueue(
        Script(tool_calls=(FakeToolCall("get_weather", '{"city":"Paris"}', "call_a"),)),
        Script(text="It is sunny in Paris."),
    )
    client = openai.AsyncOpenAI(base_url=f"{proxy.url}/v1", api_key="sk-client", max_retries=0)
    agent = Agent(
        name="weather",
        instructions="Answer with the weather tool.",
        tools=[get_weather],
        model=OpenAIResponsesModel(model="gpt-x", openai_client=client),
    )

    try:
        result = await Runner.run(
            agent, "Weather in Paris?", run_config=RunConfig(tracing_disabled=True)
        )
    finally:
        await client.close()

    assert result.final_output == "It is sunny in Paris."
    first, second = sent(upstream)
    tool = first["tools"][0]
    assert (tool.get("function") or tool)["name"] == "get_weather"
    assert last_result(upstream, second) == {
        "role": "tool",
        "tool_call_id": "call_a",
        "content": "sunny in Paris",
    }


@function_tool(defer_loading=True)
def get_forecast(city: str) -> str:
    """Weather forecast for a city: temperature, rain and wind by day."""
    return f"snow in {city} on Friday"


@function_tool(defer_loading=True)
def book_table(restaurant: str, people: int) -> str:
    """Book a table at a restaurant for a number of people."""
    return "booked"


@function_tool(defer_loading=True)
def convert_currency(amount: float, to: str) -> str:
    """Convert an amount of money into another currency."""
    return "converted"


async def test_an_agents_sdk_agent_searches_its_deferred_tools(
    start_proxy: StartProxy, upstream: FakeUpstream
) -> None:
    """The SDK's ToolSearchTool with deferred function tools, a chat-only upstream:
    toolgraph runs the search, the model sees only what it found, the SDK runs the call."""
    upstream.enqueue(
        Script(tool_calls=(FakeToolCall("get_forecast", '{"city":"Oslo"}', "call_f"),)),
        Script(text="Snow in Oslo on Friday."),
    )
    proxy = start_proxy()
    client = openai.AsyncOpenAI(base_url=f"{proxy.url}/v1", api_key="sk-client", max_retries=0)
    agent = Agent(
        name="planner",
        instructions="Use the tools you find.",
        tools=[ToolSearchTool(), get_forecast, book_table, convert_currency],
        model=OpenAIResponsesModel(model="gpt-x", openai_client=client),
    )

    try:
        result = await Runner.run(
            agent, "Will it snow in Oslo on Friday?", run_config=RunConfig(tracing_disabled=True)
        )
    finally:
        await client.close()

    assert result.final_output == "Snow in Oslo on Friday."
    first, second = sent(upstream)
    names = [tool["function"]["name"] for tool in first["tools"]]
    assert names[0] == "get_forecast"
    assert len(names) < 3  # what the search found, not every deferred tool
    assert "get_forecast" in [tool["function"]["name"] for tool in second["tools"]]
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_f",
        "content": "snow in Oslo on Friday",
    }


async def test_an_agents_sdk_agent_streams(proxy: ServerThread, upstream: FakeUpstream) -> None:
    upstream.enqueue(Script(text="streamed words here"))
    client = openai.AsyncOpenAI(base_url=f"{proxy.url}/v1", api_key="sk-client", max_retries=0)
    agent = Agent(name="plain", model=OpenAIResponsesModel(model="gpt-x", openai_client=client))

    try:
        result = Runner.run_streamed(agent, "Say it", run_config=RunConfig(tracing_disabled=True))
        kinds = [event.type async for event in result.stream_events()]
    finally:
        await client.close()

    assert result.final_output == "streamed words here"
    assert "raw_response_event" in kinds


@tool
def get_time(tz: str) -> str:
    """The time in a time zone."""
    return f"noon in {tz}"


def test_langchain_with_the_responses_api(proxy: ServerThread, upstream: FakeUpstream) -> None:
    upstream.enqueue(
        Script(tool_calls=(FakeToolCall("get_time", '{"tz":"UTC"}', "call_t"),)),
        Script(text="It is noon."),
    )
    llm = ChatOpenAI(
        model="gpt-x",
        base_url=f"{proxy.url}/v1",
        api_key="sk-client",  # type: ignore[arg-type]
        use_responses_api=True,
        max_retries=0,
    ).bind_tools([get_time])

    first = llm.invoke("What time is it in UTC?")
    (call,) = first.tool_calls  # type: ignore[attr-defined]
    assert (call["name"], call["args"], call["id"]) == ("get_time", {"tz": "UTC"}, "call_t")
    history: list[Any] = [
        ("user", "What time is it in UTC?"),
        first,
        {"role": "tool", "tool_call_id": "call_t", "content": get_time.invoke(call["args"])},
    ]
    second = llm.invoke(history)

    assert second.text == "It is noon."
    _, second_sent = sent(upstream)
    assert last_result(upstream, second_sent) == {
        "role": "tool",
        "tool_call_id": "call_t",
        "content": "noon in UTC",
    }
