"""What an orchestrated request keeps, and that keeping it never breaks the request:
integers past 64 bits in tool answers and arguments, Idempotency-Key outcomes once
tools ran, the in-process keys' bound, and a Redis that goes away."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.conftest import ServerThread, StartProxy
from tests.orchestrate.conftest import (
    BIG_BALANCE,
    ORCHESTRATE,
    Brain,
    LocalTools,
    http_tool,
    sdk,
    seed_catalog,
    stream_parts,
    trace,
    user,
)


def serve_tools(start_proxy: StartProxy, local_tools: LocalTools, **settings: Any) -> ServerThread:
    """A proxy whose catalog holds the loopback tools that answer at once."""
    base = local_tools.url
    seed_catalog(
        [
            http_tool("account_balance", "The balance of a bank account", f"{base}/balance"),
            http_tool("echo_lookup", "Echo a lookup back", f"{base}/echo"),
        ]
    )
    return start_proxy(
        planner={"policy": "llm", "top_k": 10, "memory_k": 0},
        executor={"allow_private_networks": True, "retries": 0},
        **settings,
    )


def ask(server: ServerThread, text: str, stream: bool) -> tuple[str, str]:
    """(answer, trace id) of an orchestrated request through the SDK."""
    client = sdk(server).chat.completions
    if stream:
        with client.with_streaming_response.create(
            model="fake-model", messages=user(text), stream=True, extra_body=ORCHESTRATE
        ) as response:
            content, _, _ = stream_parts(response.parse())
            return content, response.headers["x-toolgraph-trace-id"]
    raw = client.with_raw_response.create(
        model="fake-model", messages=user(text), extra_body=ORCHESTRATE
    )
    return raw.parse().choices[0].message.content or "", raw.headers["x-toolgraph-trace-id"]


# --- integers past 64 bits ---------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_a_tool_answer_with_an_integer_past_64_bits_is_answered_and_traced_exactly(
    start_proxy: StartProxy, local_tools: LocalTools, brain: Brain, stream: bool
) -> None:
    server = serve_tools(start_proxy, local_tools)
    brain.one_step("Look up the account balance", "balance", "account_balance", {"label": "s"})
    answer, trace_id = ask(server, "What is my balance?", stream)
    assert str(BIG_BALANCE) in answer  # the answering model was shown the exact digits
    (call,) = trace(server, trace_id)["calls"]
    assert call["output"] == {"account": "s", "balance": BIG_BALANCE}
    assert local_tools.hits["balance"] == 1


def test_an_argument_past_64_bits_reaches_the_tool_and_the_trace_exactly(
    start_proxy: StartProxy, local_tools: LocalTools, brain: Brain
) -> None:
    server = serve_tools(start_proxy, local_tools)
    huge = 10**30
    brain.one_step("Echo the lookup", "Echo", "echo_lookup", {"label": "x", "seconds": huge})
    _, trace_id = ask(server, "Echo it.", stream=False)
    (call,) = trace(server, trace_id)["calls"]
    assert call["arguments"] == {"label": "x", "seconds": huge}
    assert call["output"]["query"]["seconds"] == str(huge)


def test_a_follow_up_reuses_a_result_with_an_integer_past_64_bits(
    start_proxy: StartProxy, local_tools: LocalTools, brain: Brain
) -> None:
    server = serve_tools(start_proxy, local_tools)
    brain.one_step("Look up the account balance", "balance", "account_balance", {"label": "s"})
    answer, _ = ask(server, "What is my balance?", stream=False)
    follow_up = [
        *user("What is my balance?"),
        {"role": "assistant", "content": answer},
        {"role": "user", "content": "Look up the account balance again, please."},
    ]
    raw = sdk(server).chat.completions.with_raw_response.create(
        model="fake-model", messages=follow_up, extra_body=ORCHESTRATE
    )
    (call,) = trace(server, raw.headers["x-toolgraph-trace-id"])["calls"]
    assert call["reused"] is True
    assert call["output"]["balance"] == BIG_BALANCE
    assert local_tools.hits["balance"] == 1


def test_the_trace_endpoint_serves_big_integers_as_digits(
    start_proxy: StartProxy, local_tools: LocalTools, brain: Brain
) -> None:
    server = serve_tools(start_proxy, local_tools)
    brain.one_step("Look up the account balance", "balance", "account_balance", {"label": "s"})
    _, trace_id = ask(server, "What is my balance?", stream=False)
    text = httpx.get(f"{server.url}/v1/toolgraph/traces/{trace_id}", timeout=10).text
    assert f'"balance":{BIG_BALANCE}' in text
