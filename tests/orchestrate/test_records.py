"""What an orchestrated request keeps, and that keeping it never breaks the request:
integers past 64 bits in tool answers and arguments, Idempotency-Key outcomes once
tools ran, the in-process keys' bound, and a Redis that goes away."""

from __future__ import annotations

import logging
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import openai
import pytest

from testing.fake_upstream import FakeUpstream, Script
from tests.conftest import ServerThread, StartProxy, running_redis
from tests.orchestrate.conftest import (
    BIG_BALANCE,
    ORCHESTRATE,
    Brain,
    LocalTools,
    http_tool,
    read_trace,
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
    text = read_trace(server, trace_id).text
    assert f'"balance":{BIG_BALANCE}' in text


# --- Idempotency-Key: once a tool ran, the key keeps an outcome ---------------------


def wait_for(condition: Callable[[], bool], seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def sdk_body(stream: bool) -> bytes:
    """The bytes the SDK sends for the request the tests retry: a key's fingerprint is
    the body's hash, so the request that leaves must send the very same."""
    sent: list[bytes] = []

    def capture(request: httpx.Request) -> httpx.Response:
        sent.append(request.read())
        return httpx.Response(400, json={"error": {"message": "captured"}})

    with (
        openai.OpenAI(
            base_url="http://capture/v1",
            api_key="sk-client",
            max_retries=0,
            http_client=httpx.Client(transport=httpx.MockTransport(capture)),
        ) as client,
        pytest.raises(openai.BadRequestError),
    ):
        client.chat.completions.create(**asked(stream))
    return sent[0]


def asked(stream: bool) -> dict[str, Any]:
    return {
        "model": "fake-model",
        "messages": user("What is my balance?"),
        "stream": stream,
        "extra_body": ORCHESTRATE,
        "extra_headers": {"Idempotency-Key": "pay-42"},
    }


def leave_during_the_answer(
    server: ServerThread, upstream: FakeUpstream, brain: Brain, stream: bool
) -> None:
    """Send the keyed request and hang up once its tools ran and the answer call is out
    (the upstream holds that call open), as a client whose timeout ran out does."""
    body = sdk_body(stream)
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nidempotency-key: pay-42\r\n"
        "authorization: Bearer sk-client\r\n"  # keys are per client: the SDK's key
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as client:
        client.sendall(head.encode() + body)
        wait_for(lambda: brain.asked["answer"] > 0)
    wait_for(lambda: upstream.disconnects == 1)  # the proxy gave the answer call up


@pytest.mark.parametrize("stream", [False, True])
def test_a_retry_after_the_client_left_mid_answer_gets_a_clear_error_not_a_second_run(
    start_proxy: StartProxy,
    local_tools: LocalTools,
    brain: Brain,
    upstream: FakeUpstream,
    stream: bool,
) -> None:
    server = serve_tools(start_proxy, local_tools)
    brain.one_step("Look up the account balance", "balance", "account_balance", {"label": "s"})
    brain.answer_script = Script(hang=True)
    leave_during_the_answer(server, upstream, brain, stream)
    assert local_tools.hits["balance"] == 1
    # the SDK's own retries (409 while the first request winds down, then the outcome)
    retrying = sdk(server, max_retries=4)
    with pytest.raises(openai.ConflictError) as raised:
        retrying.chat.completions.create(**asked(stream))
    assert raised.value.code == "idempotent_request_abandoned"
    headers = raised.value.response.headers
    assert headers["x-should-retry"] == "false"
    assert headers["idempotent-replayed"] == "true"
    assert local_tools.hits["balance"] == 1  # never a second run
    first = trace(server, headers["x-toolgraph-trace-id"])  # what the tool returned
    assert first["calls"][0]["output"]["balance"] == BIG_BALANCE


# --- in-process keys: kept to their TTL, never pushed out by other requests ----------


def test_keys_outlive_unrelated_traffic_and_a_full_store_refuses_new_keys(
    start_proxy: StartProxy, local_tools: LocalTools, brain: Brain
) -> None:
    bounds = {"max_traces": 2, "max_conversations": 2, "max_idempotency_keys": 2}
    server = serve_tools(start_proxy, local_tools, orchestrate=bounds)
    brain.one_step("Look up the account balance", "balance", "account_balance", {"label": "s"})
    client = sdk(server).chat.completions
    keyed = {**asked(False), "extra_headers": {"Idempotency-Key": "transfer-1"}}
    first = client.with_raw_response.create(**keyed)
    for i in range(4):  # twice as many other requests as traces and results are kept
        ask(server, f"What is my balance, take {i}?", stream=False)
    runs = local_tools.hits["balance"]
    again = client.with_raw_response.create(**keyed)
    assert again.headers["idempotent-replayed"] == "true"
    assert again.parse().model_dump() == first.parse().model_dump()
    assert local_tools.hits["balance"] == runs
    client.create(**{**keyed, "extra_headers": {"Idempotency-Key": "transfer-2"}})
    runs = local_tools.hits["balance"]
    with pytest.raises(openai.InternalServerError) as raised:  # the SDK's class for 503
        client.create(**{**keyed, "extra_headers": {"Idempotency-Key": "transfer-3"}})
    assert raised.value.status_code == 503
    assert raised.value.code == "idempotency_keys_full"
    assert "orchestrate.max_idempotency_keys" in raised.value.message
    assert local_tools.hits["balance"] == runs  # refused before anything ran
    assert client.with_raw_response.create(**keyed).headers["idempotent-replayed"] == "true"


# --- a Redis that goes away ----------------------------------------------------------


@pytest.fixture
def own_redis() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A redis-server of this test alone, which the test may kill."""
    with running_redis() as redis:
        yield redis.url, redis.process


def test_a_redis_outage_never_turns_an_answer_into_an_error_and_keys_fail_early(
    start_proxy: StartProxy,
    local_tools: LocalTools,
    brain: Brain,
    own_redis: tuple[str, subprocess.Popen[bytes]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    url, redis = own_redis
    server = serve_tools(start_proxy, local_tools, redis_url=url)
    brain.one_step("Look up the account balance", "balance", "account_balance", {"label": "s"})
    ask(server, "What is my balance?", stream=False)  # Redis up: everything kept
    redis.kill()
    redis.wait(10)
    caplog.clear()
    for i, stream in enumerate((False, True, False)):
        answer, _ = ask(server, f"What is my balance, take {i}?", stream)
        assert str(BIG_BALANCE) in answer
    lost = [r for r in caplog.records if r.name == "proxy.orchestrate.records"]
    assert len(lost) == 1, [r.getMessage() for r in lost]  # one warning per interval
    assert "Redis cannot be reached" in lost[0].getMessage()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    # a key cannot be kept: refused before anything runs, and the SDK may retry it
    runs = local_tools.hits["balance"]
    with pytest.raises(openai.InternalServerError) as raised:
        sdk(server).chat.completions.create(**asked(False))
    assert raised.value.status_code == 503
    assert raised.value.code == "idempotency_store_unavailable"
    assert "x-should-retry" not in raised.value.response.headers
    assert local_tools.hits["balance"] == runs
