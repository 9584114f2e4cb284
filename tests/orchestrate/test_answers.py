"""Orchestrate mode through the official SDK: the built-in tools really run, in the
proxy's sandbox, and the answer streams back in OpenAI's shapes."""

from __future__ import annotations

import asyncio
import math
import threading
from typing import Any

import httpx
import openai
import pytest

from testing.fake_upstream import FakeUpstream, Script
from tests.conftest import ServerThread, StartProxy
from tests.orchestrate.conftest import (
    ORCHESTRATE,
    PROGRESS,
    Brain,
    sdk,
    stream_parts,
    trace,
    user,
)

QUESTION = "Evaluate the expression 2*pi*50 numerically."


@pytest.fixture
def proxy(start_proxy: StartProxy) -> ServerThread:
    return start_proxy(upstream_api_key="sk-upstream-0123456789", planner={"policy": "graph"})


def test_a_streamed_answer_is_computed_by_a_tool_the_proxy_ran(
    proxy: ServerThread, brain: Brain, upstream: FakeUpstream
) -> None:
    brain.arguments["2*pi*50"] = {"expression": "2*pi*50"}
    with sdk(proxy).chat.completions.with_streaming_response.create(
        model="fake-model",
        messages=user(QUESTION),
        stream=True,
        stream_options={"include_usage": True},
        extra_body=PROGRESS,
    ) as response:
        trace_id = response.headers["x-toolgraph-trace-id"]
        content, reasoning, chunks = stream_parts(response.parse())
    assert "planning…" in reasoning
    assert "calling evaluate_expression…" in reasoning
    assert f"{2 * math.pi * 50:.6g}"[:6] in content  # the tool's value reached the answer
    assert len({chunk.id for chunk in chunks}) == 1  # one id from progress to usage
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-2].choices[0].finish_reason == "stop"
    # usage adds up every upstream call: the arguments and the answer
    assert brain.asked["arguments"] == 1
    assert brain.asked["answer"] == 1
    recorded = trace(proxy, trace_id)
    assert recorded["upstream_calls"] == 2
    assert chunks[-1].usage.total_tokens == recorded["usage"]["total_tokens"]
    answer_prompt = _prompt_words(upstream.requests[-1].body)
    assert chunks[-1].usage.prompt_tokens > answer_prompt  # more than the answer call alone
    (call,) = recorded["calls"]
    assert call["tool"] == "evaluate_expression"
    assert call["outcome"] == "ok"
    assert call["arguments"] == {"expression": "2*pi*50"}
    assert call["output"]["value"] == pytest.approx(2 * math.pi * 50)
    assert recorded["plan"]["choices"] == {"s1": "evaluate_expression"}
    assert recorded["answer"] == {"kind": "answer"}
    assert set(recorded["timings"]) >= {"catalog", "plan", "execute", "answer", "total"}
    # the tool's own time (its sandbox) is inside the execute stage, told apart
    assert 0 < recorded["timings"]["tools"] <= recorded["timings"]["execute"]


def test_the_answer_stage_of_a_stream_lasts_until_its_last_chunk(
    proxy: ServerThread, brain: Brain
) -> None:
    brain.arguments["2*pi*50"] = {"expression": "2*pi*50"}
    brain.answer_script = Script(text="one two three four", chunk_delay=0.1)
    with sdk(proxy).chat.completions.with_streaming_response.create(
        model="fake-model", messages=user(QUESTION), stream=True, extra_body=ORCHESTRATE
    ) as response:
        content, _, _ = stream_parts(response.parse())
        trace_id = response.headers["x-toolgraph-trace-id"]
    assert content == "one two three four"
    timings = trace(proxy, trace_id)["timings"]
    assert timings["answer"] >= 0.4  # five events, 0.1 s apart
    # toolgraph's own time leaves out the waits between the answer's chunks too (the
    # overhead header of a stream is sent before planning: the trace has the whole)
    assert timings["total"] - timings["own"] >= 0.3


def test_progress_is_off_unless_asked_and_non_stream_gets_the_same_answer(
    proxy: ServerThread, brain: Brain
) -> None:
    brain.arguments["2*pi*50"] = {"expression": "2*pi*50"}
    client = sdk(proxy)
    stream = client.chat.completions.create(
        model="fake-model", messages=user(QUESTION), stream=True, extra_body=ORCHESTRATE
    )
    content, reasoning, chunks = stream_parts(stream)
    assert reasoning == ""
    assert all(chunk.usage is None for chunk in chunks)  # not asked for
    raw = client.chat.completions.with_raw_response.create(
        model="fake-model", messages=user(QUESTION), extra_body=ORCHESTRATE
    )
    completion = raw.parse()
    assert completion.choices[0].message.content == content
    assert completion.usage is not None
    assert completion.usage.total_tokens > 0
    assert raw.headers["x-toolgraph-trace-id"] != ""


#: Tokens the fake upstream reports per stage (prompt, completion): no two alike.
STAGE_TOKENS = {
    "decompose": (301, 31),
    "pick": (202, 22),
    "reflect": (55, 5),
    "arguments": (103, 13),
    "answer": (404, 44),
}


@pytest.mark.parametrize("stream", [False, True])
def test_the_trace_lists_each_upstream_call_with_what_it_was_for_and_its_tokens(
    start_proxy: StartProxy, brain: Brain, stream: bool
) -> None:
    server = start_proxy(planner={"policy": "llm", "top_k": 10, "memory_k": 0})
    brain.one_step(QUESTION, "2*pi*50", "evaluate_expression", {"expression": "2*pi*50"})
    brain.usage = dict(STAGE_TOKENS)
    client = sdk(server).chat.completions
    if stream:
        with client.with_streaming_response.create(
            model="fake-model",
            messages=user(QUESTION),
            stream=True,
            stream_options={"include_usage": True},
            extra_body=ORCHESTRATE,
        ) as response:
            trace_id = response.headers["x-toolgraph-trace-id"]
            usage = stream_parts(response.parse())[2][-1].usage
    else:
        raw = client.with_raw_response.create(
            model="fake-model", messages=user(QUESTION), extra_body=ORCHESTRATE
        )
        trace_id, usage = raw.headers["x-toolgraph-trace-id"], raw.parse().usage
    recorded = trace(server, trace_id)
    calls = [(c["purpose"], c["about"]) for c in recorded["upstream_usage"]]
    assert calls == [
        ("decompose", ""),
        ("pick", "s1"),
        ("reflect", ""),
        ("arguments", "evaluate_expression"),
        ("answer", ""),
    ]
    for call in recorded["upstream_usage"]:
        assert (call["prompt_tokens"], call["completion_tokens"]) == STAGE_TOKENS[call["purpose"]]
    assert recorded["upstream_calls"] == 5
    assert usage.prompt_tokens == sum(p for p, _ in STAGE_TOKENS.values())
    assert usage.completion_tokens == sum(c for _, c in STAGE_TOKENS.values())


def test_the_mode_header_and_the_configured_default_choose_orchestrate(
    start_proxy: StartProxy, brain: Brain
) -> None:
    brain.arguments["2*pi*50"] = {"expression": "2*pi*50"}
    server = start_proxy(default_mode="orchestrate", planner={"policy": "graph"})
    client = sdk(server)
    completion = client.chat.completions.create(model="fake-model", messages=user(QUESTION))
    assert "314.159" in (completion.choices[0].message.content or "")
    # a request with its own tools is the client's to run: passed through untouched
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    before = brain.asked["arguments"]
    client.chat.completions.create(model="fake-model", messages=user(QUESTION), tools=tools)  # type: ignore[arg-type]
    assert brain.asked["arguments"] == before


def test_asking_for_orchestrate_with_own_tools_is_a_clear_400(proxy: ServerThread) -> None:
    response = httpx.post(
        f"{proxy.url}/v1/chat/completions",
        json={
            "model": "fake-model",
            "messages": user(QUESTION),
            "tools": [{"type": "function", "function": {"name": "f"}}],
            **ORCHESTRATE,
        },
        timeout=30,
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "tools"
    assert error["code"] == "tools_not_allowed"


def test_an_unknown_trace_is_a_404_naming_it(proxy: ServerThread) -> None:
    response = httpx.get(f"{proxy.url}/v1/toolgraph/traces/{'0' * 32}", timeout=10)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "trace_not_found"


def _prompt_words(body: dict[str, Any]) -> int:
    """The fake upstream's prompt token count: words of every message."""
    return sum(len(str(m.get("content") or "").split()) for m in body["messages"])


def test_an_answer_stream_that_breaks_ends_in_an_error_event(
    proxy: ServerThread, brain: Brain
) -> None:
    brain.arguments["2*pi*50"] = {"expression": "2*pi*50"}
    seen = threading.Event()
    brain.answer_script = Script(
        text="one two three four five six", drop_after_events=3, drop_when=seen
    )
    with sdk(proxy).chat.completions.with_streaming_response.create(
        model="fake-model", messages=user(QUESTION), stream=True, extra_body=ORCHESTRATE
    ) as response:
        trace_id = response.headers["x-toolgraph-trace-id"]
        received: list[str] = []

        def read_all() -> None:
            for chunk in response.parse():
                received.append(chunk.choices[0].delta.content or "")
                if "".join(received):
                    seen.set()  # the upstream breaks off only now

        with pytest.raises(openai.APIError):
            read_all()
    assert "".join(received).startswith("one")
    assert trace(proxy, trace_id)["answer"]["kind"] == "error"


async def test_concurrent_requests_each_get_their_own_results(
    proxy: ServerThread, brain: Brain
) -> None:
    numbers = list(range(11, 23))
    for n in numbers:
        brain.arguments[f"{n}*{n}"] = {"expression": f"{n}*{n}"}
    client = openai.AsyncOpenAI(base_url=f"{proxy.url}/v1", api_key="sk-client", max_retries=0)

    async def ask(n: int) -> str:
        stream = await client.chat.completions.create(
            model="fake-model",
            messages=user(f"Evaluate the expression {n}*{n} numerically."),
            stream=True,
            extra_body=ORCHESTRATE,
        )
        parts = [c.choices[0].delta.content or "" async for c in stream if c.choices]
        return "".join(parts)

    try:
        answers = await asyncio.gather(*(ask(n) for n in numbers))
    finally:
        await client.close()
    for n, answer in zip(numbers, answers, strict=True):
        assert str(n * n) in answer
        others = [str(m * m) for m in numbers if m != n]
        assert not any(other in answer for other in others)


@pytest.mark.parametrize("stream", [False, True])
def test_a_catalog_that_cannot_load_is_a_clear_503(
    start_proxy: StartProxy, brain: Brain, stream: bool
) -> None:
    from tests.conftest import free_port

    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens: Qdrant is down
    server = start_proxy(planner={"policy": "graph"}, qdrant_url=dead)
    client = sdk(server)

    def ask() -> None:
        reply = client.chat.completions.create(
            model="fake-model", messages=user(QUESTION), stream=stream, extra_body=ORCHESTRATE
        )
        if stream:
            stream_parts(reply)  # type: ignore[arg-type]

    with pytest.raises(openai.APIError) as raised:
        ask()
    assert "the tool catalog could not be loaded" in raised.value.message
    if not stream:
        assert isinstance(raised.value, openai.InternalServerError)
        assert raised.value.status_code == 503
        assert raised.value.code == "catalog_unavailable"
    assert brain.asked["answer"] == 0
