"""Step ids in written arguments become the earlier results they name."""

from __future__ import annotations

import pytest
from pydantic import JsonValue

from proxy.execute.references import resolve, scalar_of, scalars


@pytest.mark.parametrize(
    ("output", "value"),
    [
        (24.0, 24.0),
        (7, 7.0),
        ({"derivative": "24", "method": "symbolic", "value": 24.0}, 24.0),
        ({"operation": "dot", "result": 32.0}, 32.0),
        ({"value": "24", "result": 3}, 3.0),  # a text value is not the number
        ({"operation": "cross", "result": [6.0, -3.0, 1.0]}, None),
        (True, None),
        ("24", None),
        ({"rows": 3}, None),
    ],
)
def test_a_result_is_one_number_or_none(output: JsonValue, value: float | None) -> None:
    assert scalar_of(output) == value


def test_the_names_of_numbers_among_the_results() -> None:
    outputs: dict[str, JsonValue] = {
        "s1": {"value": 24.0, "method": "symbolic"},
        "s2": {"result": [1.0, 2.0]},
        "s3": {"steps": 40, "max_abs": 0.5, "converged": True},
        "s4": 7,
    }
    assert scalars(outputs) == {
        "s1": 24.0,
        "s1.value": 24.0,
        "s1.result": 24.0,
        "s3.steps": 40.0,
        "s3.max_abs": 0.5,
        "s4": 7.0,
        "s4.value": 7.0,
        "s4.result": 7.0,
    }


@pytest.mark.parametrize(
    ("arguments", "resolved"),
    [
        ({"expression": "s2 + s1"}, {"expression": "4.0 + 24.0"}),
        ({"expression": "sqrt(s1.value) * 4"}, {"expression": "sqrt(24.0) * 4"}),
        ({"scalar": "s1"}, {"scalar": 24.0}),
        ({"scalar": " s2.result "}, {"scalar": 4.0}),
        ({"variables": {"a": "s1", "b": 2}}, {"variables": {"a": 24.0, "b": 2}}),
        ({"a": ["s1", "s2"]}, {"a": [24.0, 4.0]}),
        ({"expression": "2 * s3.max_abs"}, {"expression": "2 * 0.5"}),
        # not a step's name: inside longer names, a call, an unknown field, another step
        ({"expression": "xs1 + s1_b + s1(2) + s1.size + s3"}, None),
        ({"note": "s10 is not s1"}, {"note": "s10 is not 24.0"}),
    ],
)
def test_names_of_steps_become_their_numbers(
    arguments: dict[str, JsonValue], resolved: dict[str, JsonValue] | None
) -> None:
    values = scalars({"s1": {"value": 24.0}, "s2": {"result": 4.0}, "s3": {"max_abs": 0.5}})
    assert resolve(arguments, values) == (arguments if resolved is None else resolved)


def test_nothing_to_resolve_leaves_the_arguments_alone() -> None:
    assert resolve({"expression": "s1 + 1"}, {}) == {"expression": "s1 + 1"}
