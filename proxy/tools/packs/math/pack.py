"""The built-in tools by name, and the JSON-in, JSON-out entry the sandbox calls.

Importing this module imports SymPy and NumPy; the sandbox's fork server does it
once, so each call's child process starts with them loaded.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping

from pydantic import JsonValue

from proxy.tools.errors import ToolInputError
from proxy.tools.packs.math.calculus import (
    calculate_derivative,
    calculate_integral,
    evaluate_expression,
)
from proxy.tools.packs.math.simulation import run_simulation
from proxy.tools.packs.math.vectors import vector_operation

Function = Callable[[Mapping[str, JsonValue]], JsonValue]

FUNCTIONS: dict[str, Function] = {
    "evaluate_expression": evaluate_expression,
    "calculate_integral": calculate_integral,
    "calculate_derivative": calculate_derivative,
    "vector_operation": vector_operation,
    "run_simulation": run_simulation,
}


def call(
    name: str, arguments: Mapping[str, JsonValue], functions: Mapping[str, Function] = FUNCTIONS
) -> JsonValue:
    """Run one tool in this process (the sandbox's child, or a test)."""
    function = functions.get(name)
    if function is None:
        raise ToolInputError(f"no built-in tool named {name}")
    return finite(function(arguments))


def call_json(
    payload: bytes,
    out_of_memory: Callable[[], bool] = lambda: False,
    functions: Mapping[str, Function] = FUNCTIONS,
) -> bytes:
    """``{"name", "arguments"}`` in, ``{"result"}`` or ``{"error", "kind"}`` out.

    ``out_of_memory`` tells whether this process reached its memory limit. A C
    extension whose allocation fails does not always raise :class:`MemoryError`
    (SymPy's ``SystemError: … returned NULL without setting an exception``), so any
    error raised once the limit was reached counts as running out of memory.
    """
    try:
        request = json.loads(payload)
        result = call(request["name"], request["arguments"], functions)
        reply: dict[str, JsonValue] = {"result": result}
    except ToolInputError as exc:
        reply = {"error": str(exc), "kind": "input"}
    except MemoryError:
        reply = _OUT_OF_MEMORY
    except RecursionError:
        reply = {"error": "the expression is nested too deeply", "kind": "input"}
    except Exception as exc:  # the child's outermost edge: report, never crash silently
        internal: dict[str, JsonValue] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        reply = _OUT_OF_MEMORY if out_of_memory() else {**internal, "kind": "internal"}
    return json.dumps(reply, allow_nan=False).encode()


_OUT_OF_MEMORY: dict[str, JsonValue] = {
    "error": "the computation needed too much memory",
    "kind": "input",
}


def finite(value: JsonValue) -> JsonValue:
    """``value`` with NaN and infinities as strings, which JSON cannot carry as numbers."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, list):
        return [finite(item) for item in value]
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    return value
