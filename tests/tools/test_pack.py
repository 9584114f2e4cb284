"""The built-in tools compute the right things (in-process: the sandbox is tested apart)."""

from __future__ import annotations

import math
import re

import pytest
from pydantic import JsonValue

from proxy.tools.errors import ToolInputError
from proxy.tools.packs.math import pack


def call(name: str, **arguments: JsonValue) -> dict[str, JsonValue]:
    result = pack.call(name, arguments)
    assert isinstance(result, dict)
    return result


def number(value: JsonValue) -> float:
    assert isinstance(value, float | int)
    return float(value)


def test_skin_depth_of_copper_at_1_ghz() -> None:
    result = call(
        "evaluate_expression",
        expression="sqrt(2/(omega*mu_0*sigma))",
        variables={"omega": 2 * math.pi * 1e9, "sigma": 5.8e7},
    )
    assert number(result["value"]) == pytest.approx(2.09e-6, rel=2e-3)


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("ε₀*μ₀*c^2", 1.0),
        ("1/sqrt(epsilon_0*mu_0)", 299792458.0),
        ("q_e/(4*pi*eps0*(1e-10)**2)", 1.4399645e11),
        ("log10(1000) + ln(e)", 4.0),
        ("atan2(1, 1)*4", math.pi),
        ("2**10 % 1000", 24.0),
    ],
)
def test_expressions_know_constants_and_functions(expression: str, value: float) -> None:
    assert number(call("evaluate_expression", expression=expression)["value"]) == pytest.approx(
        value, rel=1e-6
    )


def test_free_symbols_come_back_symbolic() -> None:
    result = call("evaluate_expression", expression="a*b + a*b")
    assert result["expression"] == "2*a*b"
    assert result["free_symbols"] == ["a", "b"]


def test_integrals() -> None:
    assert call("calculate_integral", expression="sin(x)", lower=0, upper="pi")["value"] == 2.0
    assert call("calculate_integral", expression="x**2")["antiderivative"] == "x**3/3"
    gaussian = call(
        "calculate_integral", expression="exp(-t^2)", variable="t", lower="-oo", upper="oo"
    )
    assert number(gaussian["value"]) == pytest.approx(math.sqrt(math.pi))
    numeric = call(
        "calculate_integral", expression="exp(-x**2)*cos(x**3)", lower=0, upper=2, method="numeric"
    )
    assert numeric["method"] == "numeric"
    assert number(numeric["value"]) == pytest.approx(0.6918, abs=2e-2)


def test_derivatives_symbolic_and_numeric() -> None:
    symbolic = call("calculate_derivative", expression="x**3*sin(x)", at="pi")
    assert symbolic["derivative"] == "x**2*(x*cos(x) + 3*sin(x))"
    assert number(symbolic["value"]) == pytest.approx(-(math.pi**3))
    assert next(iter(symbolic)) == "value"  # the number asked for first, then the formula
    numeric = call("calculate_derivative", expression="x**3", at=2, order=2, method="numeric")
    assert number(numeric["value"]) == pytest.approx(12.0, rel=1e-6)


@pytest.mark.parametrize(
    ("arguments", "result"),
    [
        ({"operation": "cross", "a": [1, 0, 0], "b": [0, 1, 0]}, [0.0, 0.0, 1.0]),
        ({"operation": "cross", "a": [2, 0], "b": [0, 3]}, [0.0, 0.0, 6.0]),
        ({"operation": "dot", "a": [1, 2, 3], "b": [4, 5, 6]}, 32.0),
        ({"operation": "magnitude", "a": [3, 4]}, 5.0),
        ({"operation": "normalize", "a": [0, 0, 2]}, [0.0, 0.0, 1.0]),
        ({"operation": "project", "a": [2, 2], "b": [1, 0]}, [2.0, 0.0]),
        ({"operation": "scale", "a": [1, -1], "scalar": 2.5}, [2.5, -2.5]),
        (
            {"operation": "angle", "a": [1, 0], "b": [0, 2]},
            {"radians": math.pi / 2, "degrees": 90.0},
        ),
    ],
)
def test_vector_operations(arguments: dict[str, JsonValue], result: JsonValue) -> None:
    assert pack.call("vector_operation", arguments) == {
        "operation": arguments["operation"],
        "result": result,
    }


def test_laplace2d_keeps_its_boundaries_and_its_symmetry() -> None:
    result = call("run_simulation", sim_type="laplace2d", params={"nx": 41, "ny": 41, "top": 10.0})
    grid = result["potential"]
    assert isinstance(grid, list)
    rows = [[number(v) for v in row] for row in grid if isinstance(row, list)]
    assert result["converged"] is True
    assert all(v == 10.0 for v in rows[0])
    assert all(v == 0.0 for v in rows[-1])
    assert all(row[0] == 0.0 and row[-1] == 0.0 for row in rows[1:])
    for row in rows:  # mirror image about the vertical centre line
        assert row == pytest.approx(row[::-1], abs=1e-6)
    # By superposition of the four rotations, the centre of a square is the mean edge value.
    assert number(result["center"]) == pytest.approx(2.5, abs=0.02)
    middle = [row[len(row) // 2] for row in rows]
    assert middle == sorted(middle, reverse=True)  # falls away from the hot edge


def test_point_charge_and_wire_fields() -> None:
    charge = call(
        "run_simulation",
        sim_type="point_charges",
        params={"charges": [{"q": 1e-9, "x": 0, "y": 0}], "points": [[1, 0], [0, 0, 2]]},
    )
    assert charge["E"] == [
        pytest.approx([8.9875517923, 0.0, 0.0]),
        pytest.approx([0.0, 0.0, 8.9875517923 / 4]),
    ]
    dipole = call(
        "run_simulation",
        sim_type="point_charges",
        params={
            "charges": [{"q": 1e-9, "x": -1, "y": 0}, {"q": -1e-9, "x": 1, "y": 0}],
            "points": [[0, 0], [0, 5]],
        },
    )
    assert dipole["V"] == [pytest.approx(0.0, abs=1e-9), pytest.approx(0.0, abs=1e-9)]
    wires = call(
        "run_simulation",
        sim_type="wire_field",
        params={"wires": [{"current": 1, "x": 0, "y": 0}], "points": [[1, 0], [0, -2]]},
    )
    assert wires["B"] == [
        pytest.approx([0.0, 2e-7], rel=1e-6),
        pytest.approx([1e-7, 0.0], rel=1e-6),
    ]


def test_wave_1d_splits_the_pulse_and_comes_back_after_a_period() -> None:
    half = call("run_simulation", sim_type="wave_1d", params={"duration": 0.25, "width": 0.03})
    assert number(half["max_abs"]) == pytest.approx(0.5, abs=0.02)
    initial = call("run_simulation", sim_type="wave_1d", params={"duration": 0.0, "width": 0.05})
    period = call(
        "run_simulation",
        sim_type="wave_1d",
        params={"duration": 2.0, "width": 0.05, "courant": 1.0},
    )
    assert period["u"] == pytest.approx(initial["u"], abs=0.02)


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        (
            "evaluate_expression",
            {"expression": "__import__('os').system('id')"},
            "not an allowed function",
        ),
        ("evaluate_expression", {"expression": "x.__class__"}, "attribute is not allowed"),
        ("evaluate_expression", {"expression": "9**9**9**9"}, "exponents are limited"),
        ("evaluate_expression", {"expression": "2**(10**6)"}, "exponents are limited"),
        ("evaluate_expression", {"expression": "(lambda: 1)()"}, "not an allowed function"),
        ("evaluate_expression", {"expression": "[1][0]"}, "subscript is not allowed"),
        ("evaluate_expression", {"expression": "'a' * 3"}, "only numbers"),
        ("evaluate_expression", {"expression": "exec"}, None),
        ("evaluate_expression", {"expression": "x" * 2000}, "longer than"),
        ("evaluate_expression", {"expression": "1+" * 300 + "1"}, "more than"),
        ("evaluate_expression", {"expression": "1/0"}, "no finite real value"),
        (
            "evaluate_expression",
            {"expression": "x", "variables": {"__class__": 1}},
            "not a usable name",
        ),
        ("evaluate_expression", {"expression": "sin(x=1)"}, "plain arguments"),
        ("calculate_derivative", {"expression": "x", "order": 1000}, "order"),
        ("vector_operation", {"operation": "cross", "a": [1, 2, 3, 4], "b": [1, 2, 3, 4]}, "cross"),
        (
            "vector_operation",
            {"operation": "dot", "a": [0.0] * 5000, "b": [0.0] * 5000},
            "1 to 1000",
        ),
        ("run_simulation", {"sim_type": "laplace2d", "params": {"nx": 100000}}, "nx must be"),
        ("run_simulation", {"sim_type": "wave_1d", "params": {"duration": 1e9}}, "steps"),
        (
            "run_simulation",
            {"sim_type": "point_charges", "params": {"charges": [{"x": 0}]}},
            "needs q, y",
        ),
        ("run_simulation", {"sim_type": "nbody"}, "sim_type must be"),
    ],
)
def test_bad_and_hostile_inputs_are_refused(
    name: str, arguments: dict[str, JsonValue], message: str | None
) -> None:
    if message is None:  # a harmless name: just a symbol, never Python's exec
        assert pack.call(name, arguments) == {
            "expression": "exec",
            "free_symbols": ["exec"],
            "note": "give values for the free symbols in 'variables' to get a number",
        }
        return
    with pytest.raises(ToolInputError, match=message):
        pack.call(name, arguments)


def test_a_wrong_simulation_shape_is_answered_with_the_right_one() -> None:
    # what a 1.5B model wrote for a point charge, in a measured run
    wrong = {"charge": {"q": 2e-9}, "position": [0, 0, 0]}
    with pytest.raises(ToolInputError) as caught:
        pack.call("run_simulation", {"sim_type": "point_charges", "params": wrong})
    message = str(caught.value)
    assert "point_charges has no parameter charge, position" in message
    assert '"charges": [{"q": C, "x": m, "y": m, "z": m}' in message
    with pytest.raises(ToolInputError, match=r"wires must be a list.*takes params \{\"wires\""):
        pack.call("run_simulation", {"sim_type": "wire_field", "params": {"points": [[1, 0]]}})


def test_a_named_constant_keeps_its_value() -> None:
    rejected = {"expression": "mu_0 * 2", "variables": {"mu_0": 4.803e-07}}
    with pytest.raises(
        ToolInputError, match=re.escape("mu_0 is the built-in constant mu_0 = 1.25664e-06")
    ):
        pack.call("evaluate_expression", rejected)
    with pytest.raises(ToolInputError, match="μ0 is the built-in constant mu_0"):
        pack.call("evaluate_expression", {"expression": "2 * μ0", "variables": {"μ0": 1.0}})
    # the constant's own value, to a few digits, is welcome; one-letter names stay the caller's
    same = call("evaluate_expression", expression="mu_0 * 2", variables={"mu_0": 1.2566e-6})
    assert number(same["value"]) == pytest.approx(2.5132e-6)
    side = call("evaluate_expression", expression="sqrt(a**2 + c**2)", variables={"a": 3, "c": 4})
    assert number(side["value"]) == pytest.approx(5.0)


def test_the_json_entry_reports_errors_by_kind() -> None:
    assert pack.call_json(
        b'{"name": "evaluate_expression", "arguments": {"expression": "1+1"}}'
    ) == (b'{"result": {"value": 2.0, "exact": "2"}}')
    refused = pack.call_json(b'{"name": "nope", "arguments": {}}')
    assert refused == b'{"error": "no built-in tool named nope", "kind": "input"}'


def test_a_simulation_takes_numbers_written_as_strings() -> None:
    charge = {"q": "5 nC", "x": "0", "y": "0", "z": "0"}
    field = call(
        "run_simulation",
        sim_type="point_charges",
        params={"charges": [charge], "points": [[0, 0, 3]]},
    )
    assert number(field["E_magnitude"][0]) == pytest.approx(4.993084, rel=1e-4)
