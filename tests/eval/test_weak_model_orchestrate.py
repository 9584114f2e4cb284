"""The weak-model orchestrate script counts what it says it counts (no model needed)."""

from __future__ import annotations

from typing import Any

import pytest
from rich.console import Console

from eval.weak_model_orchestrate import (
    PROBES,
    Exchange,
    Probe,
    answer_kind,
    describe,
    error_outcome,
    is_streamed,
    render,
    slim_trace,
    tally,
    trace_figures,
    wants_progress,
)

TRACE: dict[str, Any] = {
    "plan": {
        "policy": "graph",
        "notes": ["fell back to the LLM-free policy: the decomposition was not JSON"],
        "llm_calls": 3,
        "subtasks": [],
        "choices": {},
    },
    "calls": [
        {"node": "s1", "tool": "evaluate_expression", "outcome": "ok", "attempts": 1},
        {"node": "s2", "tool": "vector_operation", "outcome": "ok", "attempts": 2},
        {
            "node": "s3",
            "tool": "calculate_integral",
            "outcome": "failed",
            "attempts": 3,
            "error": "calculate_integral: no valid arguments after 3 attempts: ...",
        },
        {"node": "s4", "tool": "run_simulation", "outcome": "skipped", "attempts": 0},
    ],
    "answer": {"kind": "answer"},
}


def test_the_requests_mix_streams_progress_and_plain_questions() -> None:
    modes = {(is_streamed(i), wants_progress(i)) for i in range(len(PROBES))}
    assert modes == {(False, False), (False, True), (True, False), (True, True)}
    assert sum(is_streamed(i) for i in range(len(PROBES))) == len(PROBES) // 2
    assert 25 <= len(PROBES) <= 40
    assert sum(not probe.needs_tool for probe in PROBES) >= 2
    assert len({probe.turns for probe in PROBES}) == len(PROBES)


def test_turns_alternate_user_and_assistant_after_the_system_prompt() -> None:
    roles = [m["role"] for m in Probe(("a", "b", "c")).messages()]
    assert roles == ["system", "user", "assistant", "user"]


@pytest.mark.parametrize(
    ("status", "body", "outcome"),
    [
        (400, {"message": "bad", "type": "invalid_request_error", "code": None}, "error"),
        (502, {"message": "tool failed", "type": "tool_error", "code": "tool_failed"}, "error"),
        (504, {"error": {"message": "too slow", "type": "upstream_error"}}, "error"),
        (
            500,
            {"message": "toolgraph failed", "type": "server_error", "code": "internal_error"},
            "crash",
        ),
        (502, "<html>Bad Gateway</html>", "crash"),
        (None, {"message": "cut", "type": "upstream_error", "code": "upstream_timeout"}, "error"),
        (None, None, "crash"),
        (422, None, "error"),
    ],
)
def test_an_error_is_clean_only_in_openais_shape_and_not_internal(
    status: int | None, body: object, outcome: str
) -> None:
    assert error_outcome(status, body) == outcome


@pytest.mark.parametrize(
    ("exchange", "kind"),
    [
        (Exchange(outcome="answer", content="12", trace={"answer": {"kind": "answer"}}), "answer"),
        (
            Exchange(
                outcome="answer", content="Which car?", trace={"answer": {"kind": "question"}}
            ),
            "question",
        ),
        (Exchange(outcome="answer", content="12"), "answer"),
        (Exchange(outcome="answer", content="  "), "empty"),
        (Exchange(outcome="answer", content="sorry", trace={"answer": {"kind": "error"}}), "error"),
        (Exchange(outcome="hang"), "hang"),
        (Exchange(outcome="crash", content="half an answer"), "crash"),
    ],
)
def test_how_a_request_ended(exchange: Exchange, kind: str) -> None:
    assert answer_kind(exchange) == kind


def test_trace_figures_count_fallbacks_retries_and_give_ups() -> None:
    figures = trace_figures(TRACE)
    assert figures.policy == "graph"
    assert figures.fell_back
    assert figures.plan_llm_calls == 3
    assert figures.calls == 4
    assert figures.retried == 2
    assert figures.gave_up == 1
    assert figures.outcomes == {"ok": 2, "failed": 1, "skipped": 1}
    assert trace_figures(None).calls == 0
    assert not trace_figures({"plan": {"notes": ["no planner model"]}, "calls": []}).fell_back


def test_tally_sums_the_rows() -> None:
    rows = [
        describe(
            0, PROBES[0], Exchange(outcome="answer", content="314.159", seconds=10.0, trace=TRACE)
        ),
        describe(1, PROBES[1], Exchange(outcome="hang", seconds=240.0)),
        describe(2, PROBES[2], Exchange(outcome="error", error="502: upstream", seconds=20.0)),
        describe(
            3,
            PROBES[3],
            Exchange(
                outcome="answer", content="?", seconds=30.0, trace={"answer": {"kind": "question"}}
            ),
        ),
    ]
    figures = tally(rows)
    assert figures["requests"] == 4
    assert figures["streamed"] == 2
    assert figures["well_formed"] == 2
    assert figures["ends"] == {
        "answer": 1,
        "question": 1,
        "error": 1,
        "empty": 0,
        "crash": 0,
        "hang": 1,
    }
    assert figures["traces_read"] == 2
    assert figures["planner_fallbacks"] == 1
    assert figures["argument_retries"] == 2
    assert figures["argument_give_ups"] == 1
    assert figures["tool_outcomes"] == {"ok": 2, "failed": 1, "skipped": 1}
    assert figures["seconds_p50"] == 25.0
    assert figures["seconds_max"] == 240.0
    console = Console(width=120, record=True)
    console.print(render({"model": "m", "figures": figures}))
    assert "arguments given up" in console.export_text()


def test_tally_of_nothing() -> None:
    figures = tally([])
    assert figures["requests"] == 0
    assert figures["seconds_p50"] is None


def test_the_results_file_keeps_a_slim_trace() -> None:
    full = {
        **TRACE,
        "calls": [{**TRACE["calls"][0], "output": {"big": "x" * 10_000}, "compressed": "y" * 1000}],
    }
    full["plan"] = {**TRACE["plan"], "decisions": [{"candidates": ["many"]}]}
    slim = slim_trace(full)
    assert slim is not None
    assert "decisions" not in slim["plan"]
    assert slim["plan"]["notes"] == TRACE["plan"]["notes"]
    assert "output" not in slim["calls"][0]
    assert len(slim["calls"][0]["compressed"]) == 300
    assert slim["answer"] == {"kind": "answer"}
    assert trace_figures(slim) == trace_figures(full)
    assert slim_trace(None) is None
