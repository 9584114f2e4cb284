"""Orchestrate mode's request-level behaviour: questions back to the user, hostile
arguments, Idempotency-Key replays, follow-ups that reuse earlier results, and the
same records in Redis."""

from __future__ import annotations

from pathlib import Path

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from proxy.orchestrate.pipeline import BACKTRACKS
from testing.fake_upstream import FakeUpstream, Script
from tests.conftest import ServerThread, StartProxy
from tests.orchestrate.conftest import (
    ORCHESTRATE,
    Brain,
    only_call,
    sdk,
    stream_parts,
    trace,
    user,
)

QUESTION = "Evaluate the expression 2*pi*50 numerically."


@pytest.fixture
def proxy(start_proxy: StartProxy) -> ServerThread:
    return start_proxy(planner={"policy": "graph"})


@pytest.mark.parametrize("stream", [False, True])
def test_a_missing_required_value_comes_back_as_a_question(
    proxy: ServerThread, brain: Brain, stream: bool
) -> None:
    brain.arguments["2*pi"] = {
        "missing": ["expression"],
        "question": "Which formula should I evaluate?",
    }
    client = sdk(proxy)
    if stream:
        content, _, chunks = stream_parts(
            client.chat.completions.create(
                model="fake-model", messages=user(QUESTION), stream=True, extra_body=ORCHESTRATE
            )
        )
        assert chunks[-1].choices[0].finish_reason == "stop"
    else:
        completion = client.chat.completions.create(
            model="fake-model", messages=user(QUESTION), extra_body=ORCHESTRATE
        )
        content = completion.choices[0].message.content or ""
        assert completion.choices[0].finish_reason == "stop"
    assert content == "Which formula should I evaluate?"
    assert brain.asked["answer"] == 0  # no guess: the question is the answer


@pytest.mark.parametrize(
    ("expression", "refusal"),
    [
        ("__import__('os').system('touch /tmp/toolgraph-pwned')", "not an allowed function"),
        ("().__class__.__bases__[0].__subclasses__()", "not an allowed function"),
        ("9**9**9**9", "exponents are limited"),
    ],
)
def test_a_hostile_expression_is_refused_and_the_proxy_answers_on(
    proxy: ServerThread, brain: Brain, expression: str, refusal: str
) -> None:
    brain.arguments["2*pi*50"] = {"expression": expression}
    call = only_call(proxy, user(QUESTION))
    assert call["outcome"] == "failed"
    assert refusal in call["error"]
    assert not Path("/tmp/toolgraph-pwned").exists()
    assert "s1 (evaluate_expression): failed" in brain.prompts[-1][1]
    brain.arguments["2*pi*50"] = {"expression": "2*pi*50"}  # and the next request works
    completion = sdk(proxy).chat.completions.create(
        model="fake-model", messages=user(QUESTION), extra_body=ORCHESTRATE
    )
    assert "314.159" in (completion.choices[0].message.content or "")


def test_a_replayed_idempotency_key_returns_the_first_answer_without_running_tools(
    proxy: ServerThread, brain: Brain
) -> None:
    brain.arguments["2*pi*50"] = {"expression": "2*pi*50"}
    client = sdk(proxy)
    key = {"Idempotency-Key": "order-7f3a"}
    first = client.chat.completions.with_raw_response.create(
        model="fake-model", messages=user(QUESTION), extra_body=ORCHESTRATE, extra_headers=key
    )
    asked = sum(brain.asked.values())
    again = client.chat.completions.with_raw_response.create(
        model="fake-model", messages=user(QUESTION), extra_body=ORCHESTRATE, extra_headers=key
    )
    assert sum(brain.asked.values()) == asked  # nothing planned, run or answered again
    assert again.headers["idempotent-replayed"] == "true"
    assert again.parse().model_dump() == first.parse().model_dump()
    assert again.headers["x-toolgraph-trace-id"] == first.headers["x-toolgraph-trace-id"]
    with pytest.raises(openai.ConflictError) as raised:
        client.chat.completions.create(
            model="fake-model",
            messages=user("Evaluate 3*pi."),
            extra_body=ORCHESTRATE,
            extra_headers=key,
        )
    assert raised.value.code == "idempotency_key_reused"
    assert raised.value.response.headers["x-should-retry"] == "false"


def test_a_replayed_stream_gets_the_same_events(proxy: ServerThread, brain: Brain) -> None:
    brain.arguments["2*pi*50"] = {"expression": "2*pi*50"}
    body = {"model": "fake-model", "messages": user(QUESTION), "stream": True, **ORCHESTRATE}
    headers = {"idempotency-key": "stream-1"}
    url = f"{proxy.url}/v1/chat/completions"
    first = httpx.post(url, json=body, headers=headers, timeout=30)
    asked = sum(brain.asked.values())
    again = httpx.post(url, json=body, headers=headers, timeout=30)
    assert sum(brain.asked.values()) == asked
    assert again.headers["content-type"].startswith("text/event-stream")
    events = [e for e in first.text.split("\n\n") if e and not e.startswith(":")]
    assert again.text.split("\n\n")[: len(events)] == events
    assert events[-1] == "data: [DONE]"


def test_a_bad_idempotency_key_is_a_400(proxy: ServerThread) -> None:
    response = httpx.post(
        f"{proxy.url}/v1/chat/completions",
        json={"model": "fake-model", "messages": user(QUESTION), **ORCHESTRATE},
        headers={"idempotency-key": "x" * 300},
        timeout=30,
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_idempotency_key"


def test_a_follow_up_reuses_the_earlier_turns_results(proxy: ServerThread, brain: Brain) -> None:
    brain.arguments["2*pi*50"] = {"expression": "2*pi*50"}
    client = sdk(proxy)
    first = client.chat.completions.create(
        model="fake-model", messages=user(QUESTION), extra_body=ORCHESTRATE
    )
    answer = first.choices[0].message.content or ""
    follow_up = [
        *user(QUESTION),
        {"role": "assistant", "content": answer},
        {"role": "user", "content": "Evaluate the expression 2*pi*50 again, to be sure."},
    ]
    call = only_call(proxy, follow_up)
    assert call["reused"] is True  # same tool, same arguments: answered from turn one
    assert call["outcome"] == "ok"
    arguments_prompt = [text for stage, text in brain.prompts if stage == "arguments"][-1]
    assert '<result id="earlier-1">' in arguments_prompt
    assert "Results from earlier in this conversation" in brain.prompts[-1][1]
    # another conversation with the same last message finds nothing to reuse
    other = [*user("hello"), {"role": "assistant", "content": answer}, follow_up[-1]]
    assert only_call(proxy, other)["reused"] is False


def test_traces_replays_and_results_live_in_redis(
    start_proxy: StartProxy, redis_server: str, brain: Brain, upstream: FakeUpstream
) -> None:
    brain.arguments["2*pi*50"] = {"expression": "2*pi*50"}
    key = {"Idempotency-Key": "redis-1"}
    first = start_proxy(planner={"policy": "graph"}, redis_url=redis_server)
    raw = sdk(first).chat.completions.with_raw_response.create(
        model="fake-model", messages=user(QUESTION), extra_body=ORCHESTRATE, extra_headers=key
    )
    trace_id = raw.headers["x-toolgraph-trace-id"]
    # a second replica sharing the Redis sees the trace and replays the answer
    second = start_proxy(planner={"policy": "graph"}, redis_url=redis_server)
    assert trace(second, trace_id)["calls"][0]["outcome"] == "ok"
    asked = sum(brain.asked.values())
    again = sdk(second).chat.completions.with_raw_response.create(
        model="fake-model", messages=user(QUESTION), extra_body=ORCHESTRATE, extra_headers=key
    )
    assert again.headers["idempotent-replayed"] == "true"
    assert sum(brain.asked.values()) == asked


def test_an_answer_that_fails_after_tools_ran_is_not_retried_nor_run_twice(
    proxy: ServerThread, brain: Brain
) -> None:
    brain.arguments["2*pi*50"] = {"expression": "2*pi*50"}
    brain.answer_script = Script(status=503)
    client = sdk(proxy)
    key = {"Idempotency-Key": "fails-after-tools"}
    with pytest.raises(openai.InternalServerError) as raised:
        client.chat.completions.create(
            model="fake-model", messages=user(QUESTION), extra_body=ORCHESTRATE, extra_headers=key
        )
    headers = raised.value.response.headers
    assert headers["x-should-retry"] == "false"
    recorded = trace(proxy, headers["x-toolgraph-trace-id"])
    assert recorded["calls"][0]["outcome"] == "ok"
    assert recorded["answer"]["kind"] == "error"
    # the SDK's own retries are on by default: with the key, a retry replays the error
    asked = brain.asked["arguments"]
    retrying = sdk(proxy, max_retries=2)
    with pytest.raises(openai.InternalServerError) as again:
        retrying.chat.completions.create(
            model="fake-model", messages=user(QUESTION), extra_body=ORCHESTRATE, extra_headers=key
        )
    assert again.value.response.headers["idempotent-replayed"] == "true"
    assert brain.asked["arguments"] == asked


def test_a_failure_before_any_tool_ran_may_be_retried(
    start_proxy: StartProxy, brain: Brain
) -> None:
    server = start_proxy(planner={"policy": "llm"})
    brain.plan = {"no_tools": True}
    brain.answer_script = Script(status=503)
    with pytest.raises(openai.InternalServerError) as raised:
        sdk(server).chat.completions.create(
            model="fake-model", messages=user("Hi there!"), extra_body=ORCHESTRATE
        )
    assert "x-should-retry" not in raised.value.response.headers
    recorded = trace(server, raised.value.response.headers["x-toolgraph-trace-id"])
    assert recorded["plan"]["no_tools"] is True
    assert recorded["calls"] == []


def test_metrics_count_stages_tool_calls_selection_and_tokens(
    proxy: ServerThread, brain: Brain
) -> None:
    brain.arguments["2*pi*50"] = {"expression": "2*pi*50"}
    sdk(proxy).chat.completions.create(
        model="fake-model", messages=user(QUESTION), extra_body=ORCHESTRATE
    )
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(
            httpx.get(f"{proxy.url}/metrics", timeout=10).text
        )
        for sample in family.samples
    }

    def value(name: str, **labels: str) -> float:
        return samples.get((name, tuple(sorted(labels.items()))), 0.0)

    tool = {"tool": "evaluate_expression", "outcome": "ok"}
    assert value("toolgraph_tool_calls_total", **tool) >= 1
    for stage in ("catalog", "plan", "execute", "answer"):
        assert value("toolgraph_stage_duration_seconds_count", stage=stage) >= 1
    assert value("toolgraph_selected_tools_total", mode="orchestrate", kind="injected") >= 1
    assert value("toolgraph_selected_tools_total", mode="orchestrate", kind="offered") >= 1
    assert value("toolgraph_upstream_tokens_total", model="other", kind="prompt") > 0  # no route
    assert value("toolgraph_tool_response_bytes_total", stage="raw") > 0


def test_arguments_that_never_validate_give_up_after_the_bounded_retries(
    proxy: ServerThread, brain: Brain
) -> None:
    brain.arguments["2*pi*50"] = {"expression": 2, "precision": "high"}  # wrong type, unknown
    call = only_call(proxy, user(QUESTION))
    assert call["outcome"] == "failed"
    assert call["attempts"] == 3
    # The input cannot be fixed: the next candidates are tried (BACKTRACKS), three times
    # each, and the answer reports the likeliest pick's call
    assert brain.asked["arguments"] == 3 * (1 + BACKTRACKS)
    assert call["tool"] == "evaluate_expression"
    assert "no valid arguments after 3 attempts" in call["error"]
    assert "unknown parameter 'precision'" in call["error"]
