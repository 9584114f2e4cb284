"""What a run teaches: each executed edge with the outcome of the call it fed, each kept
pick over the candidates beside it, the query each kept tool served (and the tools shown
above it, as weak negatives), select mode's forwarded tools called or not; names and
queries masked as plan memory masks its texts."""

from __future__ import annotations

from proxy.execute.plan import PlanNode
from proxy.execute.scheduler import CallRecord, Outcome, PlanRun
from proxy.learning.feedback import feedback_of_run, feedback_of_select
from proxy.plan.model import Candidate, Decision, Plan, SubTask


def candidate(tool: str) -> Candidate:
    return Candidate(tool, tool, 0.0, 0.0, "retrieval")


def test_edges_count_the_outcome_of_the_call_a_success_fed() -> None:
    tasks = [
        SubTask(id="s1", text="find"),
        SubTask(id="s2", text="book", needs=("s1",)),
        SubTask(id="s3", text="tell", needs=("s2",)),
        SubTask(id="s4", text="ask", needs=("s1",)),
    ]
    nodes = {
        "s1": (PlanNode(id="s1", tool="search"), Outcome.OK),
        "s2": (PlanNode(id="s2", tool="book", needs=("s1",)), Outcome.FAILED),
        "s3": (PlanNode(id="s3", tool="sms", needs=("s2",)), Outcome.SKIPPED),
        "s4": (PlanNode(id="s4", tool="ask_user", needs=("s1",)), Outcome.NEEDS_INPUT),
    }
    run = PlanRun({i: CallRecord(node, outcome) for i, (node, outcome) in nodes.items()})
    plan = Plan(tasks, {i: node.tool for i, (node, _) in nodes.items()}, "llm")
    plan.decisions = [
        Decision("s1", [candidate("search"), candidate("lookup")], "search", "best"),
        Decision("s2", [candidate("reserve"), candidate("book")], "reserve", "best", "backtrack"),
        Decision("s2", [candidate("reserve"), candidate("book")], "book", "best"),
    ]
    assert feedback_of_run(plan, run) == {
        ("edge", "search", "book"): (0, 1),  # fed by a success, failed
        ("pick", "search", "lookup"): (1, 0),
        ("pick", "book", "reserve"): (0, 1),  # the kept pick, not the one given up
        ("served", "search", "find"): (1, 0),
        ("served", "book", "book"): (0, 1),  # failed: no negative for what was above it
    }


def test_a_served_query_counts_for_its_tool_and_against_the_tools_shown_above_it() -> None:
    token = "sk-live-0123456789abcdef"
    text = f"convert 20 euros with key {token}"
    plan = Plan([SubTask(id="s1", text=text)], {"s1": "convert"}, "graph")
    shown = [candidate("rate"), candidate("quote"), candidate("convert"), candidate("stock")]
    plan.decisions = [Decision("s1", shown, "convert", "best")]
    run = PlanRun({"s1": CallRecord(PlanNode(id="s1", tool="convert"), Outcome.OK)})
    masked = "convert 20 euros with key ***"
    served = {k: v for k, v in feedback_of_run(plan, run).items() if k[0] == "served"}
    assert served == {
        ("served", "convert", masked): (1, 0),
        ("served", "rate", masked): (0, 1),
        ("served", "quote", masked): (0, 1),
    }


def test_select_counts_each_forwarded_tool_called_or_not() -> None:
    counts = feedback_of_select(["get_weather", "send_mail", "get_weather"], ["send_mail"])
    assert counts == {("select", "get_weather", ""): (0, 1), ("select", "send_mail", ""): (1, 0)}


def test_names_are_masked_as_plan_memory_masks_its_texts() -> None:
    token, known = "sk-live-0123456789abcdef", "upstream-secret-0123456789"
    counts = feedback_of_select([f"use {token}", f"ours {known}", "plain"], [], secrets=[known])
    assert {a for _, a, _ in counts} == {"use ***", "ours ***", "plain"}
