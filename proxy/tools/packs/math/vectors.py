"""vector_operation: the vector algebra of an electromagnetics course, on NumPy."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from pydantic import JsonValue

from proxy.tools.errors import ToolInputError

MAX_LENGTH = 1000
OPERATIONS = (
    "add",
    "subtract",
    "dot",
    "cross",
    "magnitude",
    "normalize",
    "angle",
    "scale",
    "project",
)
_BINARY = {"add", "subtract", "dot", "cross", "angle", "project"}
_UNARY = {"magnitude", "normalize"}


def vector_operation(arguments: Mapping[str, JsonValue]) -> JsonValue:
    operation = arguments.get("operation")
    if operation not in OPERATIONS:
        raise ToolInputError(f"operation must be one of {', '.join(OPERATIONS)}")
    if operation in _UNARY and arguments.get("b") is not None:
        raise ToolInputError(
            f"{operation} takes one vector, a, and got b too; for the {operation} of a sum "
            "or a difference, call add or subtract first and pass its result as a"
        )
    a = as_vector(arguments.get("a"), "a")
    b = as_vector(arguments.get("b"), "b") if operation in _BINARY else None
    if b is not None and b.shape != a.shape:
        raise ToolInputError(f"a and b differ in length ({a.size} and {b.size})")
    return {"operation": operation, "result": _apply(str(operation), a, b, arguments)}


def _apply(
    operation: str, a: np.ndarray, b: np.ndarray | None, arguments: Mapping[str, JsonValue]
) -> JsonValue:
    if b is not None:
        if operation == "add":
            return _json(a + b)
        if operation == "subtract":
            return _json(a - b)
        if operation == "dot":
            return float(a @ b)
        if operation == "cross":
            if a.size not in (2, 3):
                raise ToolInputError("the cross product needs 2- or 3-component vectors")
            return _json(np.cross(_in_3d(a), _in_3d(b)))
        if operation == "angle":
            cosine = (a @ b) / (_norm(a) * _norm(b))
            radians = float(np.arccos(np.clip(cosine, -1.0, 1.0)))
            return {"radians": radians, "degrees": float(np.degrees(radians))}
        _norm(b)  # refuses the zero vector
        return _json((a @ b) / (b @ b) * b)
    if operation == "magnitude":
        return float(np.linalg.norm(a))
    if operation == "normalize":
        return _json(a / _norm(a))
    scalar = arguments.get("scalar")
    if isinstance(scalar, bool) or not isinstance(scalar, int | float):
        raise ToolInputError("scale needs a number 'scalar'")
    return _json(a * scalar)


def as_vector(value: JsonValue, name: str) -> np.ndarray:
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_LENGTH:
        raise ToolInputError(f"{name} must be a list of 1 to {MAX_LENGTH} numbers")
    if any(isinstance(v, bool) or not isinstance(v, int | float) for v in value):
        raise ToolInputError(f"{name} must hold numbers only")
    vector = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(vector)):
        raise ToolInputError(f"{name} must hold finite numbers")
    return vector


def _norm(vector: np.ndarray) -> float:
    norm = float(np.linalg.norm(vector))
    if norm == 0.0:
        raise ToolInputError("the zero vector has no direction")
    return norm


def _in_3d(vector: np.ndarray) -> np.ndarray:
    return np.pad(vector, (0, 3 - vector.size))


def _json(array: np.ndarray) -> JsonValue:
    values: JsonValue = array.tolist()
    return values
