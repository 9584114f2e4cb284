"""The triage against the fake upstream: none, one or several tool calls, what it is
shown, when a sure gate skips it, and how its answer binds the decomposition."""

from __future__ import annotations

from proxy.llm import UpstreamModel
from proxy.plan.candidates import CandidateFinder
from proxy.plan.planner import UNTRIAGED
from retriever.embedder import Encoder
from testing.fake_upstream import FakeUpstream
from tests.plan._llm_policy import REQUEST, STEPS, pick, planner, prompts, reply


async def test_triage_none_plans_no_tools_without_a_decomposition(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    upstream.enqueue(reply("none"))
    plan = await planner(finder, encoder, triage=True).plan("Thanks, that helps!", model)
    assert plan.no_tools
    assert plan.llm_calls == 1
    request = upstream.requests[0].body
    assert "response_format" not in request  # one word, not JSON
    last = request["messages"][-1]
    assert last["role"] == "user"
    assert last["content"].endswith("\nRequest: Thanks, that helps!")
    assert any(m["content"] == "several" for m in request["messages"])  # the worked examples


async def test_triage_sees_the_catalogs_closest_tools_beside_the_request(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    upstream.enqueue(reply("none"))
    await planner(finder, encoder, triage=True).plan("Find flights to Paris.", model)
    last = upstream.requests[0].body["messages"][-1]["content"]
    tools_line, request_line = last.split("\n")
    assert request_line == "Request: Find flights to Paris."
    shown = tools_line.removeprefix("Closest tools: ").split(" | ")
    assert len(shown) == 3
    assert shown[0].startswith("flight_search: ")  # retrieval's first, with its description


async def test_triage_one_plans_the_request_as_one_sub_task(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    upstream.enqueue(reply("One."), pick(1))
    plan = await planner(finder, encoder, triage=True).plan("Find flights to Paris.", model)
    assert [task.text for task in plan.subtasks] == ["Find flights to Paris."]
    assert plan.choices == {"s1": "flight_search"}
    assert plan.llm_calls == 2
    assert plan.notes == ["triage: one tool call, planned without a decomposition"]


async def test_a_sure_gate_and_one_clause_skip_the_triage(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    upstream.enqueue(pick(1))
    plan = await planner(finder, encoder, triage=True).plan(
        "Find flights to Paris.", model, tool_needed=True
    )
    assert plan.choices == {"s1": "flight_search"}
    assert plan.llm_calls == 1  # the pick alone
    assert plan.notes[0] == UNTRIAGED
    assert not any("sort requests" in prompt for prompt in prompts(upstream))


async def test_a_request_of_several_clauses_is_triaged_even_when_the_gate_is_sure(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    upstream.enqueue(reply("several"), reply(STEPS), pick(1), pick(1), pick(1))
    plan = await planner(finder, encoder, triage=True).plan(REQUEST, model, tool_needed=True)
    assert plan.llm_calls == 5
    assert UNTRIAGED not in plan.notes
    assert "sort requests" in prompts(upstream)[0]


async def test_triage_several_or_anything_else_decomposes(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    for word in ("several", "maybe two?"):
        upstream.enqueue(reply(word), reply(STEPS), pick(1), pick(1), pick(1))
        plan = await planner(finder, encoder, triage=True).plan(REQUEST, model)
        assert plan.choices == {"s1": "flight_search", "s2": "book_flight", "s3": "send_sms"}
        assert plan.llm_calls == 5


async def test_no_tools_is_refused_once_the_triage_said_tools_are_needed(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    upstream.enqueue(reply("several"), reply({"no_tools": True}), reply(STEPS), *[pick(1)] * 3)
    plan = await planner(finder, encoder, triage=True).plan(REQUEST, model)
    assert not plan.no_tools
    assert len(plan.choices) == 3
    assert "a tool is needed" in prompts(upstream)[2]


async def test_an_unreadable_triage_leaves_no_tools_to_the_decomposition(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    upstream.enqueue(reply("hmm"), reply({"no_tools": True}))
    plan = await planner(finder, encoder, triage=True).plan("Hi! How are you?", model)
    assert plan.no_tools
    assert plan.llm_calls == 2
