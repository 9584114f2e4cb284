"""Math expressions from an LLM or a user, turned into SymPy without ``eval``.

The text is parsed by Python's own parser into a syntax tree, every node is
checked against a short list (numbers, names, + - * / ** %, calls of listed
functions; no attributes, subscripts, strings, lambdas, keywords or dunders), and
the tree is then built into a SymPy expression node by node. Nothing the text says
is ever executed. Sizes are capped so that parsing and building stay cheap; the
sandbox's time and memory limits cover what is left (a symbolic integral that
never ends).
"""

from __future__ import annotations

import ast
import math
import operator
import unicodedata
from collections.abc import Callable, Mapping

import sympy

from proxy.tools.errors import ToolInputError
from proxy.tools.packs.math.quantities import quantity

MAX_CHARS = 1000
MAX_NODES = 400
MAX_EXPONENT = 1000  # a larger literal exponent is refused: 9**9**9 has 370 million digits
MAX_INT_DIGITS = 40
CONSTANT_TOLERANCE = 1e-3  # a constant given to 3 digits is still the constant


#: SI values (CODATA 2018). ``e`` and ``E`` are Euler's number; the charge is ``q_e``.
CONSTANTS: dict[str, float] = {
    "c": 299792458.0,
    "epsilon_0": 8.8541878128e-12,
    "mu_0": 1.25663706212e-6,
    "h": 6.62607015e-34,
    "hbar": 1.054571817e-34,
    "k_B": 1.380649e-23,
    "q_e": 1.602176634e-19,
    "m_e": 9.1093837015e-31,
    "m_p": 1.67262192369e-27,
    "G": 6.67430e-11,
    "g": 9.80665,
    "N_A": 6.02214076e23,
    "R": 8.314462618,
    "sigma_SB": 5.670374419e-8,
    "k_e": 8.9875517923e9,
}
_ALIASES = {
    "eps0": "epsilon_0",
    "epsilon0": "epsilon_0",
    "ε0": "epsilon_0",
    "ε_0": "epsilon_0",
    "mu0": "mu_0",
    "μ0": "mu_0",
    "μ_0": "mu_0",
    "kB": "k_B",
    "e_charge": "q_e",
    "NA": "N_A",
}
_SYMPY_CONSTANTS: dict[str, sympy.Expr] = {
    "pi": sympy.pi,
    "π": sympy.pi,
    "e": sympy.E,
    "E": sympy.E,
    "I": sympy.I,
    "oo": sympy.oo,
    "inf": sympy.oo,
}


def _log(*args: sympy.Expr) -> sympy.Expr:
    return sympy.log(*args)


_SYMPY_FUNCTIONS = (
    "sin",
    "cos",
    "tan",
    "cot",
    "sec",
    "csc",
    "asin",
    "acos",
    "atan",
    "atan2",
    "sinh",
    "cosh",
    "tanh",
    "asinh",
    "acosh",
    "atanh",
    "exp",
    "sqrt",
    "cbrt",
    "floor",
    "ceiling",
    "sign",
    "erf",
    "erfc",
    "gamma",
    "re",
    "im",
    "conjugate",
    "Abs",
    "Heaviside",
    "besselj",
    "bessely",
    "factorial",
)

FUNCTIONS: dict[str, Callable[..., sympy.Expr]] = {
    **{name: getattr(sympy, name) for name in _SYMPY_FUNCTIONS},
    "log": _log,
    "ln": sympy.log,
    "log10": lambda x: sympy.log(x, 10),
    "log2": lambda x: sympy.log(x, 2),
    "abs": sympy.Abs,
    "arcsin": sympy.asin,
    "arccos": sympy.acos,
    "arctan": sympy.atan,
    "min": sympy.Min,
    "max": sympy.Max,
}

_OPERATORS: dict[type[ast.operator], Callable[[sympy.Expr, sympy.Expr], sympy.Expr]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.Pow: lambda a, b: a**b,
    ast.Mod: lambda a, b: sympy.Mod(a, b),
}

_FLOAT_OPERATORS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.Mod: operator.mod,
}


def parse(text: object, names: Mapping[str, sympy.Expr] | None = None) -> sympy.Expr:
    """``text`` as a SymPy expression; unknown names become symbols.

    ``names`` are the caller's variables; they win over constants of the same name.
    """
    if not isinstance(text, str):
        raise ToolInputError("an expression must be a string")
    if len(text) > MAX_CHARS:
        raise ToolInputError(f"the expression is longer than {MAX_CHARS} characters")
    source = unicodedata.normalize("NFKC", text).replace("^", "**").strip()
    if not source:
        raise ToolInputError("the expression is empty")
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise ToolInputError(f"not a valid expression: {text!r}") from None
    count = sum(1 for _ in ast.walk(tree))
    if count > MAX_NODES:
        raise ToolInputError(f"the expression has more than {MAX_NODES} parts")
    return _Builder(names or {}).build(tree.body)


def variable_values(raw: object) -> dict[str, sympy.Expr]:
    """A ``variables`` argument: names to numbers (or expressions of constants)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ToolInputError("variables must be an object of name: number")
    values: dict[str, sympy.Expr] = {}
    for name, value in raw.items():
        check_name(name)
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ToolInputError(f"variable {name} must be a number")
        if isinstance(value, str) and (si := quantity(value)) is not None:
            value = si  # "2 mH": the SI number, prefix applied
        values[name] = parse(value) if isinstance(value, str) else sympy.sympify(value)
        if values[name].free_symbols:
            raise ToolInputError(f"variable {name} must be a number, got {value!r}")
        _check_not_redefined(name, values[name])
    return values


def _check_not_redefined(name: str, value: sympy.Expr) -> None:
    """Refuse a named constant given another value (``mu_0 = 4.8e-7``).

    A small model copies a wrong constant into ``variables`` and the caller's names
    win, so the error goes back to it instead. Only names that can mean nothing but the
    constant count: one-letter ones (``c``, ``h``, ``g``, ``G``, ``R``) are ordinary
    variable names too (a triangle's side ``c``) and stay the caller's.
    """
    canonical = _ALIASES.get(name, name)
    if len(name) < 2 or canonical not in CONSTANTS or not value.is_number:
        return
    known = CONSTANTS[canonical]
    if abs(float(value) - known) > CONSTANT_TOLERANCE * abs(known):
        raise ToolInputError(
            f"variables sets {name} to {float(value):g}, but {name} is the built-in constant "
            f"{canonical} = {known:g}: leave it out of variables"
        )


def check_name(name: object) -> str:
    if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
        raise ToolInputError(f"{name!r} is not a usable name")
    if len(name) > 32:
        raise ToolInputError(f"the name {name[:32]}… is too long")
    return name


class _Builder:
    def __init__(self, names: Mapping[str, sympy.Expr]) -> None:
        self.names = names

    def build(self, node: ast.expr) -> sympy.Expr:
        if isinstance(node, ast.Constant):
            return self._number(node.value)
        if isinstance(node, ast.Name):
            return self._name(node.id)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            operand = self.build(node.operand)
            return -operand if isinstance(node.op, ast.USub) else operand
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            if isinstance(node.op, ast.Pow):
                _check_exponent(node.right)
            return _OPERATORS[type(node.op)](self.build(node.left), self.build(node.right))
        if isinstance(node, ast.Call):
            return self._call(node)
        raise ToolInputError(f"{type(node).__name__.lower()} is not allowed in an expression")

    def _number(self, value: object) -> sympy.Expr:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ToolInputError("only numbers may appear as literals")
        if isinstance(value, int):
            if len(str(abs(value))) > MAX_INT_DIGITS:
                raise ToolInputError(f"integers are limited to {MAX_INT_DIGITS} digits")
            return sympy.Integer(value)
        return sympy.Float(value)

    def _name(self, name: str) -> sympy.Expr:
        check_name(name)
        if name in self.names:
            return self.names[name]
        canonical = _ALIASES.get(name, name)
        if canonical in CONSTANTS:
            return sympy.Float(CONSTANTS[canonical])
        if name in _SYMPY_CONSTANTS:
            return _SYMPY_CONSTANTS[name]
        if name in FUNCTIONS:
            raise ToolInputError(f"{name} is a function; call it as {name}(…)")
        return sympy.Symbol(name)

    def _call(self, node: ast.Call) -> sympy.Expr:
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            shown = node.func.id if isinstance(node.func, ast.Name) else "this"
            raise ToolInputError(f"{shown} is not an allowed function")
        if node.keywords or not node.args or len(node.args) > 3:
            raise ToolInputError(f"{node.func.id} takes one to three plain arguments")
        arguments = [self.build(argument) for argument in node.args]
        try:
            return FUNCTIONS[node.func.id](*arguments)
        except (TypeError, ValueError) as exc:
            raise ToolInputError(f"{node.func.id}: {exc}") from None


def _check_exponent(node: ast.expr) -> None:
    value = _constant(node)
    if value is not None and not abs(value) <= MAX_EXPONENT:
        raise ToolInputError(f"exponents are limited to ±{MAX_EXPONENT}: the result is too large")


def _constant(node: ast.expr) -> float | None:
    """The value of a subtree of number literals, in floats (inf when it overflows)."""
    try:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return float(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            inner = _constant(node.operand)
            return None if inner is None else (-inner if isinstance(node.op, ast.USub) else inner)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            left, right = _constant(node.left), _constant(node.right)
            if left is None or right is None:
                return None
            if isinstance(node.op, ast.Pow):
                return math.inf if abs(right) > MAX_EXPONENT else float(abs(left) ** right)
            return float(_FLOAT_OPERATORS[type(node.op)](left, right))
    except (OverflowError, ZeroDivisionError, ValueError, TypeError):
        return math.inf
    return None
