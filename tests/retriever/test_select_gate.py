"""Select mode's opt-in no-tool gate (``toolgraph: {"gate": true}``), through the SDK."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest

from retriever.gate.model import load_gate
from testing.fake_upstream import FakeUpstream, Script
from tests.conftest import ServerThread, StartProxy, closed_after_test
from tests.retriever.client_tools import client_tools

GATED = {"toolgraph": {"mode": "select", "top_k": 4, "gate": True}}
# "Thanks, that helps a lot!" is not here: it scores near the gate's threshold against
# most catalogs (the built-in one: 0.12-0.16 against 0.24), too near for a test.
CHIT_CHAT = "Hi there, how are you?"
#: A request the weather forecast tool of ``client_tools`` serves. ("Will it snow in
#: Oslo on Friday?" scores 0.26 against these 300 tools, over the threshold (0.24) but
#: under the catalog's cutoff (0.57): the shipped gate drops its tools; docs/benchmarks.md
#: counts that cost.)
FORECAST = "What will the weather be in Oslo on Friday?"


def user(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


def sdk(server: ServerThread) -> openai.OpenAI:
    # the first request loads the model and the gate: slow on a busy machine
    client = openai.OpenAI(
        base_url=f"{server.url}/v1", api_key="sk-client", max_retries=0, timeout=300
    )
    return closed_after_test(client)


@pytest.fixture
def client(start_proxy: StartProxy) -> openai.OpenAI:
    return sdk(start_proxy(upstream_api_key="sk-upstream"))


def sent(upstream: FakeUpstream) -> dict[str, Any]:
    body: dict[str, Any] = upstream.requests[-1].body
    assert "toolgraph" not in body
    return body


def test_chit_chat_goes_upstream_without_tools(
    client: openai.OpenAI, upstream: FakeUpstream
) -> None:
    upstream.enqueue(Script(text="You're welcome!"))
    completion = client.chat.completions.create(
        model="gpt-x",
        messages=user(CHIT_CHAT),
        tools=client_tools(),  # type: ignore[arg-type]
        tool_choice="auto",
        parallel_tool_calls=True,
        extra_body=GATED,
    )
    assert completion.choices[0].message.content == "You're welcome!"
    body = sent(upstream)
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & set(body)


def test_a_request_a_tool_serves_keeps_its_tools(
    client: openai.OpenAI, upstream: FakeUpstream
) -> None:
    upstream.enqueue(Script(text="ok"))
    client.chat.completions.create(
        model="gpt-x",
        messages=user(FORECAST),
        tools=client_tools(),  # type: ignore[arg-type]
        extra_body=GATED,
    )
    names = [tool["function"]["name"] for tool in sent(upstream)["tools"]]
    assert "get_weather_forecast" in names
    assert len(names) <= 4


def test_a_required_tool_choice_overrides_the_gate(
    client: openai.OpenAI, upstream: FakeUpstream
) -> None:
    upstream.enqueue(Script(text="ok"))
    client.chat.completions.create(
        model="gpt-x",
        messages=user(CHIT_CHAT),
        tools=client_tools(),  # type: ignore[arg-type]
        tool_choice="required",
        extra_body=GATED,
    )
    assert sent(upstream)["tools"]


def test_without_the_option_chit_chat_keeps_its_tools(
    client: openai.OpenAI, upstream: FakeUpstream
) -> None:
    upstream.enqueue(Script(text="ok"))
    client.chat.completions.create(
        model="gpt-x",
        messages=user(CHIT_CHAT),
        tools=client_tools(),  # type: ignore[arg-type]
        extra_body={"toolgraph": {"mode": "select", "top_k": 4}},
    )
    assert sent(upstream)["tools"]


def test_the_gate_weights_setting_chooses_the_gate(
    start_proxy: StartProxy, upstream: FakeUpstream, tmp_path: Path
) -> None:
    """The setting's file, whose opt-in threshold no score reaches: a request the
    shipped gate keeps its tools for goes without them."""
    never = load_gate().spec.model_copy(update={"opt_in_threshold": 1.0})
    path = tmp_path / "weights.json"
    path.write_text(never.model_dump_json())
    server = start_proxy(upstream_api_key="sk-upstream", retriever={"gate_weights": str(path)})
    upstream.enqueue(Script(text="ok"))
    sdk(server).chat.completions.create(
        model="gpt-x",
        messages=user(FORECAST),
        tools=client_tools(),  # type: ignore[arg-type]
        extra_body=GATED,
    )
    assert "tools" not in sent(upstream)
