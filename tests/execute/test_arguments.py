"""Argument generation against the fake upstream: validation, feedback, questions."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import JsonValue

from graph_store.models import Endpoint, Provenance, Tool
from proxy.config import ExecutorSettings
from proxy.errors import MissingArguments, ToolError, ToolHttpStatus, ToolInputRejected
from proxy.execute.arguments import ArgumentWriter, validate_arguments
from proxy.execute.invocation import Invoker
from proxy.execute.plan import Binding, PlanNode, ToolPlan
from proxy.execute.runner import CatalogRunner
from proxy.execute.scheduler import Outcome, Scheduler, rejected_input
from proxy.llm import UpstreamModel
from proxy.tools.builtin import PythonTools
from proxy.tools.packs.math.catalog import builtin_tools, python_tools
from proxy.tools.sandbox.runner import Sandbox
from testing.fake_upstream import FakeUpstream, Script

BOOK = Tool(
    id="test/book_room",
    name="book_room",
    original_name="book_room",
    description="Book a room in a hotel.",
    parameters={
        "type": "object",
        "properties": {
            "hotel_id": {"type": "string"},
            "nights": {"type": "integer", "minimum": 1},
            "board": {
                "type": "string",
                "enum": ["room_only", "breakfast", "half_board"],
                "default": "room_only",
            },
        },
        "required": ["hotel_id", "nights"],
    },
    endpoint=Endpoint(method="POST", url="builtin:book_room"),
    provenance=Provenance(format="test"),
)


def answer(value: object) -> Script:
    return Script(text=value if isinstance(value, str) else json.dumps(value))


def prompt_of(request: Any) -> str:
    return "\n".join(m["content"] for m in request.body["messages"])


@pytest.mark.parametrize(
    ("arguments", "problems"),
    [
        ({"hotel_id": "h1", "nights": 2}, []),
        ({"hotel_id": "h1"}, ["'nights' is a required property"]),
        ({"hotel_id": "h1", "nights": "two"}, ["nights: 'two' is not of type 'integer'"]),
        ({"hotel_id": "h1", "nights": 2, "pets": True}, ["unknown parameter 'pets'"]),
        (
            {"hotel_id": "h1", "nights": 2, "board": "all_in"},
            ["board: 'all_in' is not one of ['room_only', 'breakfast', 'half_board']"],
        ),
        ({"hotel_id": "h1", "nights": 0}, ["nights: 0 is less than the minimum of 1"]),
        (["h1", 2], ["the arguments must be a JSON object"]),
    ],
)
def test_validation_names_each_problem(arguments: object, problems: list[str]) -> None:
    assert validate_arguments(BOOK, arguments) == problems


async def test_complete_planned_arguments_need_no_llm(
    upstream: FakeUpstream, model: UpstreamModel
) -> None:
    written = await ArgumentWriter().write(
        BOOK, "book it", {"hotel_id": "h1", "nights": 2}, {}, model
    )
    assert written.arguments == {"hotel_id": "h1", "nights": 2}
    assert written.attempts == 0
    assert upstream.requests == []


async def test_the_llm_fills_the_gaps_from_earlier_results(
    upstream: FakeUpstream, model: UpstreamModel
) -> None:
    upstream.enqueue(answer({"hotel_id": "h-42", "nights": 3, "board": "breakfast"}))
    written = await ArgumentWriter().write(
        BOOK,
        "Book three nights with breakfast at the cheapest hotel found.",
        {"board": "breakfast"},
        {"search": '{"results":[{"id":"h-42","price":80}]}'},
        model,
    )
    assert written.arguments == {"hotel_id": "h-42", "nights": 3, "board": "breakfast"}
    assert written.attempts == 1
    assert upstream.requests[0].body["response_format"] == {"type": "json_object"}
    prompt = prompt_of(upstream.requests[0])
    assert '"required": ["hotel_id", "nights"]' in prompt
    assert "cheapest hotel" in prompt
    assert '<result id="search">\n{"results":[{"id":"h-42","price":80}]}\n</result>' in prompt


@pytest.mark.parametrize(
    ("task", "shown"),
    [
        ("Book two nights at hotel h-1.", False),  # nothing to choose from: left out
        ("Book two nights at hotel h-1 with breakfast.", True),
        ("Book two nights at hotel h-1, half board.", True),
    ],
)
async def test_an_optional_enum_is_shown_only_when_the_sub_task_names_a_value(
    upstream: FakeUpstream, model: UpstreamModel, task: str, shown: bool
) -> None:
    upstream.enqueue(answer({"hotel_id": "h-1", "nights": 2}))
    await ArgumentWriter().write(BOOK, task, {}, {}, model)
    spec = json.loads(prompt_of(upstream.requests[0]).split("Tool:\n", 1)[1].split("\n")[0])
    assert ("board" in spec["parameters"]["properties"]) is shown
    assert {"hotel_id", "nights"} <= set(spec["parameters"]["properties"])


async def test_a_required_enum_is_always_shown(
    upstream: FakeUpstream, model: UpstreamModel
) -> None:
    vectors = next(tool for tool in builtin_tools() if tool.name == "vector_operation")
    upstream.enqueue(answer({"operation": "angle", "a": [1, 0], "b": [0, 1]}))
    await ArgumentWriter().write(vectors, "The angle between [1, 0] and [0, 1].", {}, {}, model)
    assert '"enum": ["add", ' in prompt_of(upstream.requests[0])


async def test_validation_errors_go_back_and_the_second_answer_counts(
    upstream: FakeUpstream, model: UpstreamModel
) -> None:
    upstream.enqueue(
        answer('```json\n{"hotel_id": "h1", "nights": "two", "pets": true}\n```'),
        answer({"hotel_id": "h1", "nights": 2}),
    )
    written = await ArgumentWriter().write(BOOK, "two nights at h1", {}, {}, model)
    assert written.arguments == {"hotel_id": "h1", "nights": 2}
    assert written.attempts == 2
    retry = upstream.requests[1].body["messages"]
    assert retry[-2]["role"] == "assistant"
    assert "unknown parameter 'pets'" in retry[-1]["content"]
    assert "nights: 'two' is not of type 'integer'" in retry[-1]["content"]


async def test_a_name_the_tool_does_not_take_is_dropped_when_it_is_all_that_is_wrong(
    upstream: FakeUpstream, model: UpstreamModel
) -> None:
    upstream.enqueue(answer({"hotel_id": "h1", "nights": 2, "result": "booked"}))
    written = await ArgumentWriter().write(BOOK, "two nights at h1", {}, {}, model)
    assert written.arguments == {"hotel_id": "h1", "nights": 2}
    assert written.attempts == 1
    assert len(upstream.requests) == 1


async def test_the_writer_gives_up_after_its_attempts(
    upstream: FakeUpstream, model: UpstreamModel
) -> None:
    upstream.enqueue(answer("I would book it."), answer({"nights": 2}), answer({"nights": 2}))
    with pytest.raises(ToolInputRejected, match="after 3 attempts: 'hotel_id' is a required"):
        await ArgumentWriter(max_attempts=3).write(BOOK, "book", {}, {}, model)
    assert len(upstream.requests) == 3


async def test_planned_values_cannot_be_overwritten(
    upstream: FakeUpstream, model: UpstreamModel
) -> None:
    upstream.enqueue(answer({"hotel_id": "other", "nights": 5}))
    written = await ArgumentWriter().write(BOOK, "book", {"hotel_id": "h1"}, {}, model)
    assert written.arguments == {"hotel_id": "h1", "nights": 5}


async def test_a_missing_value_becomes_a_question(
    upstream: FakeUpstream, model: UpstreamModel
) -> None:
    upstream.enqueue(answer({"missing": ["nights"], "question": "How many nights would you like?"}))
    with pytest.raises(MissingArguments) as raised:
        await ArgumentWriter().write(BOOK, "book hotel h1", {"hotel_id": "h1"}, {}, model)
    assert raised.value.question == "How many nights would you like?"
    assert raised.value.missing == ["nights"]


async def test_an_empty_missing_beside_the_arguments_is_the_template_not_arguments(
    upstream: FakeUpstream, model: UpstreamModel
) -> None:
    """A small model filled the prompt's question form beside the arguments, naming no
    gap ({"name": "Germany", "missing": [], "question": "…"}, the pack suite's
    find_entities at 04fdec4): its keys are dropped, not refused as unknown parameters
    three times over."""
    upstream.enqueue(
        answer({"hotel_id": "h1", "nights": 2, "missing": [], "question": "Which hotel?"})
    )
    written = await ArgumentWriter().write(BOOK, "book hotel h1 for 2 nights", {}, {}, model)
    assert written.arguments == {"hotel_id": "h1", "nights": 2}
    assert written.attempts == 1
    upstream.enqueue(answer({"hotel_id": "h1", "nights": 2, "missing": ["board"]}))
    optional = await ArgumentWriter().write(BOOK, "book hotel h1 for 2 nights", {}, {}, model)
    assert optional.arguments == {"hotel_id": "h1", "nights": 2}


async def test_a_plan_asks_the_user_instead_of_guessing(
    upstream: FakeUpstream, model: UpstreamModel
) -> None:
    async def book(arguments: object) -> JsonValue:
        return {"booked": True}

    async def find(arguments: object) -> JsonValue:
        return {"results": [{"id": "h-7"}]}

    find_tool = BOOK.model_copy(
        update={
            "id": "test/find",
            "name": "find_hotel",
            "parameters": {"type": "object"},
            "endpoint": Endpoint(url="builtin:find_hotel"),
        }
    )
    runner = CatalogRunner(
        {"book_room": BOOK, "find_hotel": find_tool},
        Invoker(None, PythonTools({"book_room": book, "find_hotel": find})),
        writer=ArgumentWriter(),
        model=model,
    )
    plan = ToolPlan(
        nodes=(
            PlanNode(id="find", tool="find_hotel"),
            PlanNode(
                id="book",
                tool="book_room",
                task="Book the hotel found.",
                inputs=(Binding(source="find", path="results.0.id", target="hotel_id"),),
            ),
            PlanNode(id="confirm", tool="find_hotel", needs=("book",)),
        )
    )
    upstream.enqueue(answer({"missing": ["nights"], "question": "For how many nights?"}))
    run = await Scheduler(ExecutorSettings()).execute(plan, runner)
    assert run.records["find"].outcome is Outcome.OK
    assert run.records["book"].outcome is Outcome.NEEDS_INPUT
    assert run.records["confirm"].outcome is Outcome.SKIPPED
    assert run.questions() == ["For how many nights?"]
    assert '<result id="find">\n{"results":[{"id":"h-7"}]}\n</result>' in prompt_of(
        upstream.requests[0]
    )


@pytest.fixture
async def builtin_runner(model: UpstreamModel) -> AsyncIterator[CatalogRunner]:
    """The built-in tools in a real sandbox, their arguments written through ``model``."""
    box = Sandbox(timeout=120)  # SymPy calls on a loaded machine
    try:
        tools = {tool.name: tool for tool in builtin_tools()}
        yield CatalogRunner(
            tools, Invoker(None, python_tools(box)), writer=ArgumentWriter(), model=model
        )
    finally:
        await box.aclose()


async def test_written_arguments_drive_a_real_builtin_tool(
    upstream: FakeUpstream, builtin_runner: CatalogRunner
) -> None:
    upstream.enqueue(
        answer(
            {
                "expression": "sqrt(2/(2*pi*f*mu_0*sigma))",
                "variables": {"f": 1e9, "sigma": 5.8e7},
            }
        )
    )
    plan = ToolPlan(
        nodes=(
            PlanNode(
                id="depth",
                tool="evaluate_expression",
                task="Skin depth of copper (sigma 5.8e7 S/m) at 1 GHz",
            ),
        )
    )
    run = await Scheduler(ExecutorSettings()).execute(plan, builtin_runner)
    record = run.records["depth"]
    assert record.outcome is Outcome.OK
    assert record.arguments["variables"] == {"f": 1e9, "sigma": 5.8e7}
    assert isinstance(record.output, dict)
    assert record.output["value"] == pytest.approx(2.09e-6, rel=2e-3)


#: Two planned calls whose results (32.0 and 4.0) a later step combines.
DERIVATIVE = PlanNode(
    id="s1",
    tool="calculate_derivative",
    arguments={"expression": "x**4", "variable": "x", "at": 2},
)
INTEGRAL = PlanNode(
    id="s2",
    tool="calculate_integral",
    arguments={"expression": "x**3", "variable": "x", "lower": 0, "upper": 2},
)


async def test_an_earlier_result_named_by_its_step_is_substituted(
    upstream: FakeUpstream, builtin_runner: CatalogRunner
) -> None:
    # what a 1.5B model wrote for "sum the results of s2 and s1" in an end-to-end trace
    upstream.enqueue(answer({"expression": "s2 + s1.value"}))
    plan = ToolPlan(
        nodes=(
            DERIVATIVE,
            INTEGRAL,
            PlanNode(
                id="s3",
                tool="evaluate_expression",
                task="Sum the results of s2 and s1.",
                needs=("s1", "s2"),
            ),
        )
    )
    run = await Scheduler(ExecutorSettings(call_timeout=120)).execute(plan, builtin_runner)
    assert run.ok, run.unfinished()
    record = run.records["s3"]
    assert record.arguments == {"expression": "4.0 + 32.0"}
    assert isinstance(record.output, dict)
    assert record.output["value"] == pytest.approx(36.0)


async def test_a_step_sees_the_results_of_steps_it_reaches_only_through_another(
    upstream: FakeUpstream, builtin_runner: CatalogRunner
) -> None:
    # a decomposition that chained s1 -> s2 -> s3 although s3 combines s1 and s2
    upstream.enqueue(answer({"expression": "s1 * s2"}))
    plan = ToolPlan(
        nodes=(
            DERIVATIVE,
            INTEGRAL.model_copy(update={"needs": ("s1",)}),
            PlanNode(
                id="s3",
                tool="evaluate_expression",
                task="Multiply the two results.",
                needs=("s2",),
            ),
        )
    )
    run = await Scheduler(ExecutorSettings(call_timeout=120)).execute(plan, builtin_runner)
    assert run.ok, run.unfinished()
    assert run.records["s3"].arguments == {"expression": "32.0 * 4.0"}
    prompt = prompt_of(upstream.requests[0])
    assert '<result id="s1">' in prompt
    assert '<result id="s2">' in prompt
    output = run.records["s3"].output
    assert isinstance(output, dict)
    assert output["value"] == pytest.approx(128.0)


def _full_hotel_runner(model: UpstreamModel, booked: list[object]) -> CatalogRunner:
    async def book(arguments: object) -> JsonValue:
        booked.append(dict(arguments) if isinstance(arguments, dict) else arguments)
        if isinstance(arguments, dict) and arguments.get("hotel_id") != "h-42":
            raise ToolInputRejected("hotel_id: h-9 is full; h-42 has rooms", param="hotel_id")
        return {"booked": True}

    return CatalogRunner(
        {"book_room": BOOK},
        Invoker(None, PythonTools({"book_room": book})),
        writer=ArgumentWriter(),
        model=model,
    )


BOOK_PLAN = ToolPlan(nodes=(PlanNode(id="book", tool="book_room", task="Two nights, any hotel."),))


async def test_the_tools_own_input_error_goes_back_to_the_writer_once(
    upstream: FakeUpstream, model: UpstreamModel
) -> None:
    booked: list[object] = []
    runner = _full_hotel_runner(model, booked)
    upstream.enqueue(
        answer({"hotel_id": "h-9", "nights": 2}), answer({"hotel_id": "h-42", "nights": 2})
    )
    run = await Scheduler(ExecutorSettings()).execute(BOOK_PLAN, runner)
    record = run.records["book"]
    assert record.outcome is Outcome.OK, record.error
    assert record.arguments == {"hotel_id": "h-42", "nights": 2}
    assert booked == [{"hotel_id": "h-9", "nights": 2}, {"hotel_id": "h-42", "nights": 2}]
    assert runner.attempts["book"] == 2
    assert runner.rejected == {"book": "hotel_id: h-9 is full; h-42 has rooms"}
    second = upstream.requests[1].body["messages"]
    assert json.loads(second[-2]["content"]) == {"hotel_id": "h-9", "nights": 2}
    assert "h-9 is full; h-42 has rooms" in second[-1]["content"]
    assert "rejected" in second[-1]["content"]


async def test_a_second_rejection_fails_the_call_without_a_third_try(
    upstream: FakeUpstream, model: UpstreamModel
) -> None:
    booked: list[object] = []
    upstream.enqueue(
        answer({"hotel_id": "h-9", "nights": 2}), answer({"hotel_id": "h-7", "nights": 2})
    )
    run = await Scheduler(ExecutorSettings()).execute(BOOK_PLAN, _full_hotel_runner(model, booked))
    assert run.records["book"].outcome is Outcome.FAILED
    assert "h-9 is full" in run.records["book"].error
    assert len(booked) == 2
    assert len(upstream.requests) == 2


async def test_the_plans_own_arguments_are_not_rewritten_after_a_rejection(
    upstream: FakeUpstream, model: UpstreamModel
) -> None:
    booked: list[object] = []
    plan = ToolPlan(
        nodes=(PlanNode(id="book", tool="book_room", arguments={"hotel_id": "h-9", "nights": 2}),)
    )
    run = await Scheduler(ExecutorSettings()).execute(plan, _full_hotel_runner(model, booked))
    assert run.records["book"].outcome is Outcome.FAILED
    assert len(booked) == 1
    assert upstream.requests == []


@pytest.mark.parametrize(
    ("error", "fed_back"),
    [
        (ToolInputRejected("x: not a number"), True),
        (ToolHttpStatus(422, "book_room answered HTTP 422: nights must be positive"), True),
        (ToolHttpStatus(400, "book_room answered HTTP 400: bad hotel_id"), True),
        (ToolHttpStatus(503, "book_room answered HTTP 503"), False),
        (ToolError("book_room has no HTTP endpoint"), False),
    ],
)
def test_only_the_tools_input_errors_go_back_to_the_writer(
    error: ToolError, fed_back: bool
) -> None:
    assert rejected_input(error) is fed_back


NEIGHBORS = Tool(
    id="test/get_neighbors",
    name="geo_get_neighbors",
    original_name="geo_get_neighbors",
    description="Follow one relation from the entities of a variable.",
    parameters={
        "type": "object",
        "properties": {"variable": {"type": "string"}, "relation": {"type": "string"}},
        "required": ["variable", "relation"],
    },
    endpoint=Endpoint(method="POST", url="builtin:geo_get_neighbors"),
    provenance=Provenance(format="test"),
)
RELATIONS = ["http://example.org/geo/borders", "http://example.org/geo/capital", "^flows_through"]


async def test_a_value_from_an_earlier_output_is_chosen_by_its_number(
    upstream: FakeUpstream, model: UpstreamModel
) -> None:
    upstream.enqueue(answer({"relation": 2}))
    written = await ArgumentWriter().write(
        NEIGHBORS,
        "Find the capital of Germany.",
        {"variable": "#0"},
        {"s2": json.dumps({"variable": "#0", "relations": RELATIONS})},
        model,
        choices={"relation": RELATIONS, "variable": ["#0"]},
    )
    assert written.arguments == {"variable": "#0", "relation": "http://example.org/geo/capital"}
    prompt = prompt_of(upstream.requests[0])
    assert (
        "relation:\n"
        '  1. "http://example.org/geo/borders"\n'
        '  2. "http://example.org/geo/capital"\n'
        '  3. "^flows_through"'
    ) in prompt
    assert "variable:\n  1." not in prompt  # the plan fixed it: nothing to choose
    assert '"relation": {"type": "integer", "minimum": 1, "maximum": 3' in prompt
    assert "write a value out only when none of them fits" in prompt


async def test_a_number_off_the_list_is_refused_and_the_range_fed_back(
    upstream: FakeUpstream, model: UpstreamModel
) -> None:
    upstream.enqueue(
        answer({"variable": 1, "relation": 7}),
        answer({"variable": 1, "relation": None}),
        answer({"variable": "1", "relation": 3}),
    )
    written = await ArgumentWriter().write(
        NEIGHBORS, "neighbours", {}, {}, model, choices={"relation": RELATIONS, "variable": ["#4"]}
    )
    assert written.arguments == {"variable": "#4", "relation": "^flows_through"}
    assert written.attempts == 3
    refused = upstream.requests[1].body["messages"][-1]["content"]
    assert refused == (
        "Those arguments are invalid:\n"
        "- relation: 7 is not one of the numbers offered; answer with the number (1 to 3) of "
        "one of the values listed for relation\n"
        "Answer with the corrected JSON object only."
    )
    again = upstream.requests[2].body["messages"][-1]["content"]
    assert "- relation: null is not one of the numbers offered" in again
    assert "required property" not in again


async def test_a_value_written_out_is_left_to_the_schema_and_the_tool(
    upstream: FakeUpstream, model: UpstreamModel
) -> None:
    """The list holds what the dependencies named, not always every valid value."""
    upstream.enqueue(answer({"hotel_id": "h-9", "nights": 1, "board": "all_in"}))
    upstream.enqueue(answer({"hotel_id": "h-9", "nights": 1, "board": "half_board"}))
    written = await ArgumentWriter().write(
        BOOK, "book", {}, {}, model, choices={"hotel_id": ["h-1", "h-2"], "board": ["breakfast"]}
    )
    assert written.arguments == {"hotel_id": "h-9", "nights": 1, "board": "half_board"}
    retry = upstream.requests[1].body["messages"][-1]["content"]
    assert "board: 'all_in' is not one of ['room_only', 'breakfast', 'half_board']" in retry


async def test_a_revision_shows_the_rejected_choice_by_its_number(
    upstream: FakeUpstream, model: UpstreamModel
) -> None:
    upstream.enqueue(answer({"relation": 1}))
    written = await ArgumentWriter().revise(
        NEIGHBORS,
        "the capital",
        {"variable": "#0"},
        {},
        model,
        {"variable": "#0", "relation": RELATIONS[0]},
        "no neighbours of #0 by borders",
        choices={"relation": RELATIONS},
    )
    assert written.arguments["relation"] == RELATIONS[0]
    sent = upstream.requests[0].body["messages"]
    assert json.loads(sent[-2]["content"]) == {"variable": "#0", "relation": 1}
    assert "no neighbours of #0 by borders" in sent[-1]["content"]
