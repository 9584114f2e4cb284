"""The built-in pack as catalog tools: OpenAI function specs → graph_store ``Tool`` records.

The specs go through graph_store's own OpenAI adapter, like any imported catalog;
each record then gets a ``builtin:<name>`` endpoint, which the executor's
:class:`~proxy.execute.invocation.Invoker` routes to :func:`python_tools`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pydantic import JsonValue

from graph_store.ingest.openai_spec import parse_openai
from graph_store.models import Endpoint, Tool
from proxy.tools.builtin import BUILTIN_SCHEME, PythonTool, PythonTools
from proxy.tools.packs.math.vectors import OPERATIONS
from proxy.tools.sandbox.runner import Sandbox

GROUP = "course_assistant"

_VARIABLES: JsonValue = {
    "type": "object",
    # No example value here: a 1.5B argument writer copied an example's {"f": 1e9} over
    # the user's own numbers in the end-to-end traces.
    "description": "Numbers for the names in the expression that are not constants, "
    "by name, in SI units (a prefix converted: 2 mH is 0.002, 50 nF is 5e-8; a string "
    'such as "2 mH" is converted too); left out when the expression holds only numbers '
    "and constants.",
    "additionalProperties": {"type": "number"},
}
_METHOD: JsonValue = {"type": "string", "enum": ["auto", "symbolic", "numeric"], "default": "auto"}
_EXPRESSION: JsonValue = {
    "type": "string",
    "description": "Math in Python/SymPy syntax (^ means power). Constants (SI): c, "
    "epsilon_0 (ε₀), mu_0 (μ₀), h, hbar, k_B, q_e, m_e, m_p, G, g, N_A, R, sigma_SB, k_e, "
    "pi, e.",
}

SPECS: list[dict[str, JsonValue]] = [
    {
        "name": "evaluate_expression",
        "description": "Evaluate (calculate) any arithmetic, math or physics formula "
        "(what is 2 * pi * 50, roots, powers, logs, a wavelength c / f, an energy h * f), "
        "with named variables and physical constants; returns the number (or the "
        "simplified expression when variables are missing).",
        "x-category": "math",
        "parameters": {
            "type": "object",
            "properties": {"expression": _EXPRESSION, "variables": _VARIABLES},
            "required": ["expression"],
        },
        "x-example": {"value": 2.0898e-06},
    },
    {
        "name": "calculate_integral",
        "description": "Integrate an expression: the antiderivative, or a definite "
        "integral between two bounds, symbolically or numerically.",
        "x-category": "math",
        "parameters": {
            "type": "object",
            "properties": {
                "expression": _EXPRESSION,
                "variable": {"type": "string", "description": "Integration variable."},
                "lower": {"type": ["number", "string"], "description": "Lower bound."},
                "upper": {"type": ["number", "string"], "description": "Upper bound."},
                "method": _METHOD,
                "variables": _VARIABLES,
            },
            "required": ["expression"],
        },
        "x-example": {"value": 2.0, "exact": "2", "method": "symbolic"},
    },
    {
        "name": "calculate_derivative",
        "description": "Differentiate an expression (any order), symbolically or by "
        "finite differences, optionally at a point.",
        "x-category": "math",
        "parameters": {
            "type": "object",
            "properties": {
                "expression": _EXPRESSION,
                "variable": {"type": "string", "description": "Variable to differentiate by."},
                "order": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 10,
                    "description": "How many times to differentiate: 1 (the default) for the "
                    "first derivative, 2 for the second. Not the degree of a polynomial.",
                },
                "at": {
                    "type": ["number", "string"],
                    "description": "The value of the variable to evaluate the derivative at; "
                    "left out for the derivative as a formula.",
                },
                "method": _METHOD,
                "variables": _VARIABLES,
            },
            "required": ["expression"],
        },
        "x-example": {"value": 12.0, "derivative": "3*x**2", "method": "symbolic"},
    },
    {
        "name": "vector_operation",
        "description": "Vector algebra: add, subtract, dot, cross, magnitude, normalize, "
        "angle, scale, project.",
        "x-category": "math",
        "parameters": {
            "type": "object",
            "properties": {
                "operation": {
                    "type": "string",
                    "enum": list(OPERATIONS),
                },
                "a": {
                    "type": "array",
                    "items": {"type": "number"},
                    "description": "The vector; the only one magnitude and normalize take "
                    "(the magnitude of a sum: add first, then magnitude of its result).",
                },
                "b": {
                    "type": "array",
                    "items": {"type": "number"},
                    "description": "The second vector of add, subtract, dot, cross, angle "
                    "and project.",
                },
                "scalar": {"type": "number"},
            },
            "required": ["operation", "a"],
        },
        "x-example": {"operation": "cross", "result": [0.0, 0.0, 1.0]},
    },
    {
        "name": "run_simulation",
        "description": "Run a small physics simulation: laplace2d (potential in a box "
        "from edge potentials top/bottom/left/right, grid nx by ny), point_charges (E and V "
        "of charges [{q,x,y,z}] at points), wire_field (B of straight wires "
        "[{current,x,y}] along z at points), wave_1d (a Gaussian pulse on a string: "
        "length, speed, duration, nx).",
        "x-category": "physics",
        "parameters": {
            "type": "object",
            "properties": {
                "sim_type": {
                    "type": "string",
                    "enum": ["laplace2d", "point_charges", "wire_field", "wave_1d"],
                },
                "params": {
                    "type": "object",
                    "description": "The simulation's parameters, in SI units (C, m, A, V, "
                    'm/s, s; a prefix converted: 5 nC is 5e-9 C, or the string "5 nC"). '
                    'point_charges: {"charges": [{"q", "x", "y", "z"}], '
                    '"points": [[x, y, z]]}, the points where the field is wanted, '
                    'required; wire_field: {"wires": [{"current", "x", "y"}], '
                    '"points": [[x, y]]}, a point at the asked distance from the wire.',
                },
            },
            "required": ["sim_type"],
        },
        "x-example": {"sim_type": "wire_field", "units": {"B": "T"}, "B": [[0.0, 2e-07]]},
    },
]


def builtin_tools() -> list[Tool]:
    """The pack as catalog records, ready to import into any store."""
    specs = [
        {"x-group": GROUP, **{k: v for k, v in spec.items() if k != "x-example"}} for spec in SPECS
    ]
    parsed = parse_openai(Path(f"builtin/{GROUP}.json"), {"tools": specs})
    if parsed.errors:
        raise RuntimeError(f"the built-in specs are invalid: {parsed.errors}")
    examples = {str(spec["name"]): spec["x-example"] for spec in SPECS}
    return [
        tool.model_copy(
            update={
                "endpoint": Endpoint(method="POST", url=f"{BUILTIN_SCHEME}{tool.name}"),
                "response_example": examples[tool.name],
            }
        )
        for tool in parsed.tools
    ]


def python_tools(sandbox: Sandbox) -> PythonTools:
    """The pack's functions, each run in ``sandbox``."""
    return PythonTools(
        {str(spec["name"]): _sandboxed(sandbox, str(spec["name"])) for spec in SPECS}
    )


def _sandboxed(sandbox: Sandbox, name: str) -> PythonTool:
    async def call(arguments: Mapping[str, JsonValue]) -> JsonValue:
        return await sandbox.run(name, arguments)

    return call
