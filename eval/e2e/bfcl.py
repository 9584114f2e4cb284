"""BFCL's executable tasks that run offline: five pure functions, served over HTTP.

BFCL's ``exec_simple`` category (``../shared/data/train/bfcl/unused_datasets``) pairs
each question with the call that answers it; its functions run on BFCL's side, many
against web APIs (weather, stocks, COVID counts) this machine cannot reach. Five of
them are pure arithmetic with one unambiguous reading and an answer a 1.5B model
does not get right by heart: a binomial probability, a cosine similarity, a
mortgage's monthly payment, a future value at compound interest and the roots of a
quadratic. Each has two questions in ``exec_simple``: ten tasks. Left out: the web
ones, the ones a model answers by heart (a density, a circle's area, a gcd), and the
ones whose questions leave the formula open (the standard deviation, population or
sample; a question that asks for "combinations" over a permutations call).

The functions are written here from their BFCL descriptions. A task's expected
answer is the gold call (``possible_answer``) run through them, so the checker holds
the answer to BFCL's own arguments. The proxy reaches them as HTTP tools of a small
server in this process (:func:`serve_tools`): an argument they cannot use is a 422
with a message, as a real service answers; the all-tools client calls them directly.
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import cast

from pydantic import JsonValue
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from eval.e2e.tasks import Task
from graph_store.ingest.openai_spec import parse_openai
from graph_store.models import Tool
from testing.serve import serve_in_thread

GROUP = "bfcl_exec"
CATEGORY = "exec_simple"
#: The BFCL question numbers of the ten tasks (two per function).
QUESTIONS = (0, 1, 2, 3, 12, 13, 70, 71, 72, 73)
_TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": None}

Function = Callable[..., JsonValue]


class InputError(ValueError):
    """Arguments the function cannot use; the message says which."""


def _number(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"{name} must be a number, not {json.dumps(value)}")
    return float(value)


def _integer(value: object, name: str) -> int:
    number = _number(value, name)
    if not number.is_integer():
        raise InputError(f"{name} must be a whole number, not {value}")
    return int(number)


def _rate(value: object, name: str) -> float:
    rate = _number(value, name)
    if not 0 <= rate <= 1:
        raise InputError(f"{name} is a fraction from 0 to 1 (5% is 0.05), not {value}")
    return rate


def calc_binomial_probability(n: object, k: object, p: object) -> JsonValue:
    trials, successes, chance = _integer(n, "n"), _integer(k, "k"), _rate(p, "p")
    if not 0 <= successes <= trials:
        raise InputError(f"k must be between 0 and n ({trials}), not {successes}")
    return math.comb(trials, successes) * chance**successes * (1 - chance) ** (trials - successes)


def calculate_cosine_similarity(vectorA: object, vectorB: object) -> JsonValue:
    if not isinstance(vectorA, list) or not isinstance(vectorB, list):
        raise InputError("vectorA and vectorB must be lists of numbers")
    a = [_number(x, "vectorA") for x in vectorA]
    b = [_number(x, "vectorB") for x in vectorB]
    if len(a) != len(b) or not a:
        raise InputError(
            f"the vectors must have the same non-zero length, not {len(a)} and {len(b)}"
        )
    norms = math.hypot(*a) * math.hypot(*b)
    if norms == 0:
        raise InputError("a zero vector has no direction")
    return sum(x * y for x, y in zip(a, b, strict=True)) / norms


def mortgage_calculator(
    loan_amount: object, interest_rate: object, loan_period: object
) -> JsonValue:
    principal = _number(loan_amount, "loan_amount")
    monthly = _rate(interest_rate, "interest_rate") / 12
    months = _integer(loan_period, "loan_period") * 12
    if months <= 0:
        raise InputError("loan_period must be at least one year")
    if monthly == 0:
        return principal / months
    growth = (1 + monthly) ** months
    return principal * monthly * growth / (growth - 1)


def calculate_future_value(
    present_value: object, interest_rate: object, periods: object
) -> JsonValue:
    return _number(present_value, "present_value") * (
        1 + _rate(interest_rate, "interest_rate")
    ) ** _integer(periods, "periods")


def quadratic_roots(a: object, b: object, c: object) -> JsonValue:
    qa, qb, qc = _number(a, "a"), _number(b, "b"), _number(c, "c")
    if qa == 0:
        raise InputError("a must not be 0 (the equation would not be quadratic)")
    root = math.sqrt(abs(qb * qb - 4 * qa * qc))
    if qb * qb - 4 * qa * qc < 0:
        return [{"real": -qb / (2 * qa), "imaginary": s * root / (2 * qa)} for s in (1, -1)]
    return [(-qb + root) / (2 * qa), (-qb - root) / (2 * qa)]


FUNCTIONS: dict[str, Function] = {
    f.__name__: f
    for f in (
        calc_binomial_probability,
        calculate_cosine_similarity,
        mortgage_calculator,
        calculate_future_value,
        quadratic_roots,
    )
}


def call(name: str, arguments: Mapping[str, JsonValue]) -> JsonValue:
    """``name`` on ``arguments``; :class:`InputError` for an unknown or missing one."""
    function = FUNCTIONS.get(name)
    if function is None:
        raise InputError(f"no function named {name}")
    try:
        return function(**arguments)
    except TypeError as exc:  # a missing or unknown parameter
        raise InputError(str(exc).replace(f"{function.__name__}()", name)) from None


def _lines(path: Path) -> list[dict[str, JsonValue]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


@cache
def _rows(folder: Path) -> tuple[dict[str, dict[str, JsonValue]], dict[str, str]]:
    """The questions and the gold calls of the chosen tasks, by BFCL id."""
    unused = folder / "unused_datasets"
    questions = {str(r["id"]): r for r in _lines(unused / f"BFCL_v4_{CATEGORY}.json")}
    gold = {
        str(r["id"]): str(cast(list[JsonValue], r["ground_truth"])[0])
        for r in _lines(unused / "possible_answer" / f"BFCL_v4_{CATEGORY}.json")
    }
    ids = [f"{CATEGORY}_{n}" for n in QUESTIONS]
    return {i: questions[i] for i in ids}, {i: gold[i] for i in ids}


def gold_call(text: str) -> tuple[str, dict[str, JsonValue]]:
    """``f(a=1, b=[2, 3])`` as the name and the keyword arguments (literals only)."""
    node = ast.parse(text, mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.args:
        raise ValueError(f"not a call with keyword arguments: {text}")
    return node.func.id, {str(kw.arg): ast.literal_eval(kw.value) for kw in node.keywords}


def expected_numbers(value: JsonValue) -> tuple[float, ...]:
    if isinstance(value, list):
        return tuple(float(v) for v in value if isinstance(v, int | float))
    return (float(cast(float, value)),)


def bfcl_tasks(folder: Path) -> tuple[Task, ...]:
    """The ten tasks, each expecting what its gold call returns."""
    questions, gold = _rows(folder)
    tasks = []
    for bfcl_id, row in questions.items():
        turns = cast(list[list[dict[str, str]]], row["question"])
        name, arguments = gold_call(gold[bfcl_id])
        expected = expected_numbers(call(name, arguments))
        number = bfcl_id.rsplit("_", 1)[1]
        tasks.append(
            Task(f"bfcl_{number}", "bfcl", turns[0][-1]["content"], expected, tools=(name,))
        )
    return tuple(tasks)


def _schema(value: JsonValue) -> JsonValue:
    """BFCL's Python-flavoured schema types (``dict``, ``float``) as JSON Schema's."""
    if isinstance(value, list):
        return [_schema(v) for v in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, JsonValue] = {}
    for key, item in value.items():
        if key == "type" and isinstance(item, str) and item in _TYPES:
            mapped = _TYPES[item]
            if mapped is not None:
                out[key] = mapped
        else:
            out[key] = _schema(item)
    return out


def bfcl_tools(folder: Path, base_url: str) -> list[Tool]:
    """The five functions as catalog tools, with BFCL's own descriptions and schemas,
    served at ``base_url``/``<name>``."""
    questions, _ = _rows(folder)
    specs: dict[str, dict[str, JsonValue]] = {}
    for row in questions.values():
        for spec in cast(list[dict[str, JsonValue]], row["function"]):
            specs.setdefault(str(spec["name"]), spec)
    document = {
        "tools": [
            {
                "name": name,
                "description": spec["description"],
                "parameters": _schema(spec["parameters"]),
                "x-group": GROUP,
                "x-category": "math",
                "x-endpoint": {"method": "POST", "url": f"{base_url}/{name}"},
            }
            for name, spec in specs.items()
        ]
    }
    parsed = parse_openai(Path(f"{GROUP}.json"), document)
    if parsed.errors:
        raise RuntimeError(f"the BFCL specs are invalid: {parsed.errors}")
    return parsed.tools


async def _endpoint(request: Request) -> JSONResponse:
    name = request.path_params["name"]
    try:
        arguments = await request.json()
        if not isinstance(arguments, dict):
            raise InputError("the body must be a JSON object of arguments")
        return JSONResponse({"result": call(name, arguments)})
    except (InputError, ValueError) as exc:
        return JSONResponse({"error": str(exc)}, status_code=422)
    except (ArithmeticError, OverflowError) as exc:
        return JSONResponse({"error": f"{type(exc).__name__}: {exc}"}, status_code=422)


@contextmanager
def serve_tools() -> Iterator[str]:
    """The functions on a loopback port; yields the base URL of their endpoints."""
    app = Starlette(routes=[Route("/bfcl/{name}", _endpoint, methods=["POST"])])
    with serve_in_thread(app, ready_timeout=60, wait_loaded=False) as url:
        yield f"{url}/bfcl"
