"""SI-prefixed quantities in a built-in tool's numbers, and a magnitude given two vectors."""

from __future__ import annotations

import math

import pytest

from proxy.tools.errors import ToolInputError
from proxy.tools.packs.math.calculus import evaluate_expression
from proxy.tools.packs.math.quantities import quantity
from proxy.tools.packs.math.simulation import run_simulation
from proxy.tools.packs.math.vectors import vector_operation


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1 nC", 1e-9),
        ("5nC", 5e-9),
        ("2 mH", 2e-3),
        ("50 nF", 5e-8),
        ("4.7 kOhm", 4700.0),
        ("3 mA", 3e-3),
        ("0.2 m", 0.2),  # metres, not milli
        ("3 cm", 0.03),
        ("2 \u00b5F", 2e-6),
        ("1 T", 1.0),  # tesla
        ("-1.5e-3 C", -1.5e-3),
    ],
)
def test_a_quantity_is_its_si_number(text: str, value: float) -> None:
    found = quantity(text)
    assert found is not None
    assert math.isclose(found, value, rel_tol=1e-12)


@pytest.mark.parametrize("text", ["five nC", "1 min", "2 Pa", "x", "1 nC and 2 nC"])
def test_anything_else_is_not_a_quantity(text: str) -> None:
    assert quantity(text) is None


def test_a_point_charge_given_in_nanocoulombs_is_converted() -> None:
    def field(q: object) -> float:
        result = run_simulation(
            {
                "sim_type": "point_charges",
                "params": {"charges": [{"q": q, "x": 0, "y": 0, "z": 0}], "points": [[0, 0, 3]]},
            }
        )
        assert isinstance(result, dict)
        magnitude = result["E_magnitude"]
        assert isinstance(magnitude, list)
        return float(magnitude[0])  # type: ignore[arg-type]

    assert math.isclose(field("5 nC"), field(5e-9), rel_tol=1e-12)
    assert math.isclose(field(5e-9), 4.993084, rel_tol=1e-6)


def test_a_variable_with_a_prefixed_unit_is_converted() -> None:
    result = evaluate_expression(
        {"expression": "1/(2*pi*sqrt(L*C))", "variables": {"L": "2 mH", "C": "50 nF"}}
    )
    assert isinstance(result, dict)
    assert math.isclose(float(result["value"]), 15915.494, rel_tol=1e-6)  # type: ignore[arg-type]


def test_a_magnitude_given_two_vectors_is_refused_with_the_way_to_do_it() -> None:
    with pytest.raises(ToolInputError, match=r"magnitude takes one vector.*add or subtract first"):
        vector_operation({"operation": "magnitude", "a": [1, 2, 2], "b": [3, 0, 1]})
    assert vector_operation({"operation": "magnitude", "a": [4, 2, 3]}) == {
        "operation": "magnitude",
        "result": math.sqrt(29),
    }
