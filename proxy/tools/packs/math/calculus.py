"""evaluate_expression, calculate_integral and calculate_derivative, on SymPy.

Each takes the JSON arguments of its OpenAI function and returns JSON; wrong or
too costly arguments raise :class:`~proxy.tools.errors.ToolInputError`.
They run inside the sandbox (``proxy.tools.sandbox``), never in the proxy itself.
"""

from __future__ import annotations

from collections.abc import Mapping

import sympy
from pydantic import JsonValue

from proxy.tools.errors import ToolInputError
from proxy.tools.packs.math.expressions import check_name, parse, variable_values

MAX_ORDER = 10
_DIGITS = 15


def evaluate_expression(arguments: Mapping[str, JsonValue]) -> JsonValue:
    """The value of an expression, given its variables; symbolic when some are left free."""
    variables = variable_values(arguments.get("variables"))
    expression = parse(arguments.get("expression"), variables)
    free: list[JsonValue] = [str(s) for s in sorted(expression.free_symbols, key=str)]
    if free:
        return {
            "expression": str(sympy.simplify(expression)),
            "free_symbols": free,
            "note": "give values for the free symbols in 'variables' to get a number",
        }
    value = to_json_number(expression)
    if isinstance(value, str):
        raise ToolInputError(f"the expression has no finite real value ({value})")
    if expression.has(sympy.Float):
        return {"value": value}
    return {"value": value, "exact": _exact(expression)}


def calculate_integral(arguments: Mapping[str, JsonValue]) -> JsonValue:
    """A definite integral (both bounds) or an antiderivative, symbolic or numeric."""
    variables = variable_values(arguments.get("variables"))
    expression = parse(arguments.get("expression"), variables)
    x = sympy.Symbol(check_name(arguments.get("variable", "x")))
    method = _method(arguments)
    lower, upper = arguments.get("lower"), arguments.get("upper")
    if (lower is None) != (upper is None):
        raise ToolInputError("give both bounds for a definite integral, or neither")
    if lower is None:
        if method == "numeric":
            raise ToolInputError("a numeric integral needs both bounds")
        antiderivative = sympy.integrate(expression, x)
        return {"antiderivative": str(antiderivative), "method": "symbolic"}
    a, b = _bound(lower, variables), _bound(upper, variables)
    if method != "numeric":
        exact = sympy.integrate(expression, (x, a, b))
        if not exact.has(sympy.Integral) and not exact.free_symbols:
            return {"value": to_json_number(exact), "exact": str(exact), "method": "symbolic"}
        if method == "symbolic":
            return {"result": str(exact), "method": "symbolic"}
    if expression.free_symbols - {x}:
        raise ToolInputError("a numeric integral needs values for every other symbol")
    value = sympy.Integral(expression, (x, a, b)).evalf(_DIGITS)
    return {"value": to_json_number(value), "method": "numeric"}


def calculate_derivative(arguments: Mapping[str, JsonValue]) -> JsonValue:
    """The n-th derivative, and its value at a point when one is given."""
    variables = variable_values(arguments.get("variables"))
    expression = parse(arguments.get("expression"), variables)
    x = sympy.Symbol(check_name(arguments.get("variable", "x")))
    order = arguments.get("order", 1)
    if not isinstance(order, int) or isinstance(order, bool) or not 1 <= order <= MAX_ORDER:
        raise ToolInputError(f"order must be an integer from 1 to {MAX_ORDER}")
    at = arguments.get("at")
    method = _method(arguments)
    if method == "numeric":
        if at is None:
            raise ToolInputError("a numeric derivative needs the point 'at'")
        return {"value": _numeric_derivative(expression, x, order, _bound(at, variables))}
    derivative = sympy.simplify(sympy.diff(expression, x, order))
    formula: dict[str, JsonValue] = {"derivative": str(derivative), "method": "symbolic"}
    if at is None:
        return formula
    # The value asked for comes first: a 1.5B model answering from this result stated the
    # first field, the formula, and dropped the value (in its end-to-end traces).
    point = derivative.subs(x, _bound(at, variables))
    return {"value": to_json_number(point) if not point.free_symbols else str(point), **formula}


def _numeric_derivative(
    expression: sympy.Expr, x: sympy.Symbol, order: int, at: sympy.Expr
) -> float | str:
    """Central finite differences of the given order, in mpmath's precision."""
    if expression.free_symbols - {x}:
        raise ToolInputError("a numeric derivative needs values for every other symbol")
    step = sympy.Float(10) ** -3 * max(1, abs(float(at)))
    total = sympy.Float(0)
    for k in range(order + 1):
        shift = (sympy.Rational(order, 2) - k) * step
        total += (-1) ** k * sympy.binomial(order, k) * expression.subs(x, at + shift)
    return to_json_number((total / step**order).evalf(_DIGITS))


def _method(arguments: Mapping[str, JsonValue]) -> str:
    method = arguments.get("method", "auto")
    if method not in ("auto", "symbolic", "numeric"):
        raise ToolInputError("method must be auto, symbolic or numeric")
    return str(method)


def _bound(value: JsonValue, variables: Mapping[str, sympy.Expr]) -> sympy.Expr:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ToolInputError("a bound or point must be a number or an expression like 'pi/2'")
    return parse(value, variables) if isinstance(value, str) else sympy.sympify(value)


def to_json_number(expression: sympy.Expr) -> float | str:
    """A float when the value is a finite real number, its text otherwise."""
    value = sympy.N(expression, _DIGITS)
    if value.is_real and value.is_finite:
        return float(value)
    return str(value)


def _exact(expression: sympy.Expr) -> str:
    text = str(expression)
    return text if len(text) <= 200 else text[:200] + "…"
