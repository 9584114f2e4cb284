"""run_simulation: four small field and wave simulations, on NumPy, with capped sizes.

* ``laplace2d``: the potential in a rectangle from its four edge potentials
  (Jacobi iteration to a tolerance); ``potential[row][col]``, row 0 the top edge.
* ``point_charges``: E field and potential of point charges at given points.
* ``wire_field``: B field of infinite straight wires along z (Biot-Savart).
* ``wave_1d``: a string with fixed ends, a Gaussian pulse, leapfrog finite
  differences at a Courant number ≤ 1.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from pydantic import JsonValue

from proxy.tools.errors import ToolInputError
from proxy.tools.packs.math.expressions import CONSTANTS
from proxy.tools.packs.math.quantities import quantity

SIM_TYPES = ("laplace2d", "point_charges", "wire_field", "wave_1d")
MAX_GRID = 200
MAX_ITERATIONS = 20_000
MAX_SOURCES = 100
MAX_POINTS = 1000
MAX_WAVE_CELLS = 2000
MAX_WAVE_STEPS = 50_000
MAX_SAMPLES = 21


#: Each simulation's ``params`` as an error shows them: a caller that wrote the wrong
#: shape learns the right one from the error it gets back.
SHAPES = {
    "laplace2d": '{"top": V, "bottom": V, "left": V, "right": V, "nx": 41, "ny": 41, '
    '"tolerance": 1e-6, "max_iterations": 20000}',
    "point_charges": '{"charges": [{"q": C, "x": m, "y": m, "z": m}, …], "points": [[x, y, z], …]}',
    "wire_field": '{"wires": [{"current": A, "x": m, "y": m}, …], "points": [[x, y], …]}',
    "wave_1d": '{"length": m, "speed": m/s, "duration": s, "nx": 201, "courant": 0.9, '
    '"center": m, "width": m, "amplitude": 1.0}',
}

#: What each simulation reads; any other key is refused by name (a misspelt key is not
#: silently dropped).
PARAMS = {
    "laplace2d": frozenset(
        ("top", "bottom", "left", "right", "nx", "ny", "tolerance", "max_iterations")
    ),
    "point_charges": frozenset(("charges", "points")),
    "wire_field": frozenset(("wires", "points")),
    "wave_1d": frozenset(
        ("length", "speed", "duration", "nx", "courant", "center", "width", "amplitude")
    ),
}


def run_simulation(arguments: Mapping[str, JsonValue]) -> JsonValue:
    sim_type = arguments.get("sim_type")
    params = arguments.get("params") or {}
    runners = {
        "laplace2d": laplace2d,
        "point_charges": point_charges,
        "wire_field": wire_field,
        "wave_1d": wave_1d,
    }
    if sim_type not in runners:
        raise ToolInputError(f"sim_type must be one of {', '.join(SIM_TYPES)}")
    sim = str(sim_type)
    try:
        if not isinstance(params, dict):
            raise ToolInputError("params must be an object")
        _check_keys(sim, params)
        return {"sim_type": sim, **runners[sim](params)}
    except ToolInputError as error:
        raise ToolInputError(f"{error}; {sim} takes params {SHAPES[sim]}") from None


def _check_keys(sim: str, params: Mapping[str, JsonValue]) -> None:
    unknown = sorted(set(params) - PARAMS[sim])
    if unknown:
        raise ToolInputError(f"{sim} has no parameter {', '.join(unknown)}")


def laplace2d(params: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    nx = _integer(params, "nx", 41, 3, MAX_GRID)
    ny = _integer(params, "ny", nx, 3, MAX_GRID)
    tolerance = _number(params, "tolerance", 1e-6, 1e-12, 1.0)
    max_iterations = _integer(params, "max_iterations", MAX_ITERATIONS, 1, MAX_ITERATIONS)
    edges = {edge: _number(params, edge, 0.0) for edge in ("top", "bottom", "left", "right")}
    phi = np.zeros((ny, nx))
    phi[:, 0], phi[:, -1] = edges["left"], edges["right"]
    phi[0, :], phi[-1, :] = edges["top"], edges["bottom"]
    change, iterations = np.inf, 0
    while change > tolerance and iterations < max_iterations:
        interior = 0.25 * (phi[:-2, 1:-1] + phi[2:, 1:-1] + phi[1:-1, :-2] + phi[1:-1, 2:])
        change = float(np.max(np.abs(interior - phi[1:-1, 1:-1]))) if interior.size else 0.0
        phi[1:-1, 1:-1] = interior
        iterations += 1
    rows, cols = _sample_indices(ny), _sample_indices(nx)
    return {
        "nx": nx,
        "ny": ny,
        "iterations": iterations,
        "converged": change <= tolerance,
        "max_change": change,
        "center": float(phi[ny // 2, nx // 2]),
        "sample_rows": rows,
        "sample_cols": cols,
        "potential": phi[np.ix_(rows, cols)].round(9).tolist(),
    }


def point_charges(params: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    charges = _records(params, "charges", ("q", "x", "y", "z"), MAX_SOURCES)
    points = _points(params, 3)
    q, where = charges[:, 0], charges[:, 1:]
    offsets = points[:, None, :] - where[None, :, :]  # [point, charge, xyz]
    distance = np.linalg.norm(offsets, axis=2)
    if np.any(distance == 0):
        raise ToolInputError("a field point sits on a charge")
    k = CONSTANTS["k_e"]
    field = k * np.sum(q[None, :, None] * offsets / distance[:, :, None] ** 3, axis=1)
    potential = k * np.sum(q[None, :] / distance, axis=1)
    return {
        "units": {"E": "V/m", "V": "V"},
        "E": field.tolist(),
        "E_magnitude": np.linalg.norm(field, axis=1).tolist(),
        "V": potential.tolist(),
    }


def wire_field(params: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    wires = _records(params, "wires", ("current", "x", "y"), MAX_SOURCES)
    points = _points(params, 2)
    current, where = wires[:, 0], wires[:, 1:]
    offsets = points[:, None, :] - where[None, :, :]
    r2 = np.sum(offsets**2, axis=2)
    if np.any(r2 == 0):
        raise ToolInputError("a field point sits on a wire")
    # B = μ0 I / (2π r) along z-hat cross r-hat = (-y, x) / r
    scale = CONSTANTS["mu_0"] * current[None, :] / (2 * np.pi * r2)
    bx = np.sum(-scale * offsets[:, :, 1], axis=1)
    by = np.sum(scale * offsets[:, :, 0], axis=1)
    field = np.stack([bx, by], axis=1)
    return {
        "units": {"B": "T"},
        "B": field.tolist(),
        "B_magnitude": np.linalg.norm(field, axis=1).tolist(),
    }


def wave_1d(params: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    length = _number(params, "length", 1.0, 1e-9, 1e9)
    speed = _number(params, "speed", 1.0, 1e-9, 1e9)
    nx = _integer(params, "nx", 201, 5, MAX_WAVE_CELLS)
    courant = _number(params, "courant", 0.9, 0.01, 1.0)
    duration = _number(params, "duration", length / speed, 0.0, 1e12)
    center = _number(params, "center", length / 2, 0.0, length)
    width = _number(params, "width", length / 20, length / nx, length)
    amplitude = _number(params, "amplitude", 1.0, -1e12, 1e12)
    dx = length / (nx - 1)
    dt = courant * dx / speed
    steps = round(duration / dt)
    if steps > MAX_WAVE_STEPS:
        raise ToolInputError(f"that needs {steps} steps; the limit is {MAX_WAVE_STEPS}")
    dt = duration / steps if steps else dt
    r2 = (speed * dt / dx) ** 2
    x = np.linspace(0.0, length, nx)
    initial = amplitude * np.exp(-(((x - center) / width) ** 2))
    initial[0] = initial[-1] = 0.0
    previous, current = initial.copy(), initial.copy()
    if steps:  # first step from rest: u¹ = u⁰ + ½ r² δ²u⁰
        current[1:-1] = initial[1:-1] + 0.5 * r2 * (initial[2:] - 2 * initial[1:-1] + initial[:-2])
    for _ in range(max(0, steps - 1)):
        following = np.zeros_like(current)
        following[1:-1] = (
            2 * current[1:-1]
            - previous[1:-1]
            + r2 * (current[2:] - 2 * current[1:-1] + current[:-2])
        )
        previous, current = current, following
    samples = np.linspace(0, nx - 1, min(nx, 101)).round().astype(int)
    return {
        "time": steps * dt,
        "steps": steps,
        "dt": dt,
        "courant": float(np.sqrt(r2)),
        "x": x[samples].tolist(),
        "u": current[samples].round(12).tolist(),
        "max_abs": float(np.max(np.abs(current))),
    }


def _sample_indices(n: int) -> list[int]:
    return sorted({round(i * (n - 1) / (MAX_SAMPLES - 1)) for i in range(MAX_SAMPLES)})


def _integer(params: Mapping[str, JsonValue], key: str, default: int, low: int, high: int) -> int:
    value = params.get(key, default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ToolInputError(f"{key} must be an integer from {low} to {high}")
    return value


def _number(
    params: Mapping[str, JsonValue],
    key: str,
    default: float,
    low: float = -1e300,
    high: float = 1e300,
) -> float:
    value = _si(params.get(key, default))
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise ToolInputError(f"{key} must be a number from {low:g} to {high:g}")
    return float(value)


def _si(value: JsonValue) -> JsonValue:
    """A quantity written with its unit ("5 nC", "0.2 m"), or a number written as a
    string ("0": a 1.5B argument writer quoted a charge's coordinates), as its SI number."""
    if not isinstance(value, str):
        return value
    number = quantity(value)
    if number is None:
        try:
            number = float(value)
        except ValueError:
            return value
    return number if math.isfinite(number) else value


def _records(
    params: Mapping[str, JsonValue], key: str, fields: tuple[str, ...], limit: int
) -> np.ndarray:
    items = params.get(key)
    if not isinstance(items, list) or not 1 <= len(items) <= limit:
        raise ToolInputError(f"{key} must be a list of 1 to {limit} objects")
    rows = []
    for item in items:
        if not isinstance(item, dict):
            raise ToolInputError(f"each of {key} must be an object with {', '.join(fields)}")
        missing = [name for name in fields if name != "z" and name not in item]
        if missing:
            raise ToolInputError(f"each of {key} needs {', '.join(missing)}")
        rows.append([_number(item, name, 0.0) for name in fields])
    return np.asarray(rows, dtype=float)


def _points(params: Mapping[str, JsonValue], dimensions: int) -> np.ndarray:
    items = params.get("points")
    if not isinstance(items, list) or not 1 <= len(items) <= MAX_POINTS:
        raise ToolInputError(f"points must be a list of 1 to {MAX_POINTS} coordinates")
    rows = []
    for item in items:
        if not isinstance(item, list) or not 2 <= len(item) <= dimensions:
            raise ToolInputError(f"each point must be [x, y] or up to {dimensions} numbers")
        item = [_si(v) for v in item]
        coordinates = [v for v in item if isinstance(v, int | float) and not isinstance(v, bool)]
        if len(coordinates) != len(item):
            raise ToolInputError("point coordinates must be numbers")
        rows.append([float(v) for v in coordinates] + [0.0] * (dimensions - len(item)))
    return np.asarray(rows)
