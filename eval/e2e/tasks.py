"""The end-to-end tasks and their checker: questions with answers a program can judge.

Three kinds, all answerable offline with the built-in math and physics pack (the
pack suite's ``database`` and ``graph`` tasks are in :mod:`eval.e2e.packs`):

* ``single`` (8): one call of one built-in tool gives the answer, and the numbers
  are ones a 1.5B model does not get right by mental arithmetic (an integral of
  ``x**2 * exp(-x)``, a skin depth, a cross product, fields of charges and wires);
* ``multi`` (5): two or three calls whose results combine (a result fed into the
  next expression, two results added or divided, a cross product's magnitude);
* ``none`` (5): small talk and general knowledge, where a tool can only hurt.

The mix follows the issue's failure analysis: the single-tool ones test the pick and
the argument writer, the multi-tool ones the decomposition and the data flow, and
the no-tool ones whether the planner leaves a request alone.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

#: bfcl: one call (eval.e2e.bfcl); database, graph: the pack suite (eval.e2e.packs)
Kind = Literal["single", "multi", "none", "bfcl", "database", "graph"]
SYSTEM = (
    "You are a teaching assistant for a university math and physics course. "
    "When a question asks for a number, state the final numeric value."
)
PACK_SYSTEM = (
    "You are a data assistant for a music shop. You answer questions about the shop's "
    "database (artists, albums, genres, tracks, customers, invoices) and about a "
    "geography knowledge graph from what their tools return. State the number or the "
    "name the question asks for."
)
PACK_KINDS: tuple[Kind, ...] = ("database", "graph")

REL_TOL = 0.01  # an answer rounded to three significant digits still counts


@dataclass(frozen=True, slots=True)
class Task:
    """``expected``: numbers that must all appear in the answer (within ``REL_TOL``);
    ``words``: else a pattern the answer must match (case-insensitive)."""

    id: str
    kind: Kind
    question: str
    expected: tuple[float, ...] = ()
    words: str = ""
    tools: tuple[str, ...] = ()  # the tools a right plan uses
    wrong: str = ""  # a pattern that makes any answer wrong (a name that must not be there)


def system_for(task: Task) -> str:
    """The system prompt a task is asked under: the course's, or the pack suite's."""
    return PACK_SYSTEM if task.kind in PACK_KINDS else SYSTEM


TASKS: tuple[Task, ...] = (
    Task(
        "skin_depth", "single",
        "What is the skin depth sqrt(2/(omega*mu_0*sigma)) for omega = 1.2566e10 rad/s "
        "and sigma = 3.5e7 S/m, in metres?",
        (1.9023e-6,), tools=("evaluate_expression",),
    ),
    Task(
        "integral", "single", "Integrate x**2 * exp(-x) from 0 to 5.",
        (1.750696,), tools=("calculate_integral",),
    ),
    Task(
        "derivative", "single", "What is the derivative of x**3 * sin(x) at x = 2?",
        (7.582394,), tools=("calculate_derivative",),
    ),
    Task(
        "cross", "single", "Compute the cross product of [1, 2, 3] and [4, 5, 6].",
        (-3.0, 6.0, -3.0), tools=("vector_operation",),
    ),
    Task(
        "angle", "single", "What is the angle in degrees between the vectors [1, 2, 3] "
        "and [4, 5, 6]?",
        (12.93315,), tools=("vector_operation",),
    ),
    Task(
        "point_charge", "single", "What is the electric field strength of a 2 nC point charge "
        "at the origin, at the point (0, 2, 0) m, in N/C?",
        (4.493776,), tools=("run_simulation",),
    ),
    Task(
        "wire", "single", "What is the magnetic field 0.5 m from a long straight wire "
        "carrying 3 A, in tesla?",
        (1.2e-6,), tools=("run_simulation",),
    ),
    Task(
        "photon", "single", "What is the energy in joules of a photon of frequency 5e14 Hz "
        "(h*f)?",
        (3.313035e-19,), tools=("evaluate_expression",),
    ),
    Task(
        "integral_then_root", "multi", "Integrate x**2 from 0 to 3, then take the square root "
        "of that result and multiply it by 4.",
        (12.0,), tools=("calculate_integral", "evaluate_expression"),
    ),
    Task(
        "derivative_plus_integral", "multi", "Take the derivative of x**4 at x = 2 and the "
        "definite integral of x**3 from 0 to 2, and give their sum.",
        (36.0,), tools=("calculate_derivative", "calculate_integral", "evaluate_expression"),
    ),
    Task(
        "cross_magnitude", "multi", "What is the magnitude of the cross product of [1, 2, 0] "
        "and [0, 1, 3]?",
        (6.78233,), tools=("vector_operation",),
    ),
    Task(
        "dot_over_integral", "multi", "Divide the dot product of [1, 2, 3] and [4, 5, 6] by "
        "the integral of x from 0 to 4.",
        (4.0,), tools=("vector_operation", "calculate_integral", "evaluate_expression"),
    ),
    Task(
        "capacitor_led", "multi", "A 10 uF capacitor is charged to 5 V. Compute the energy "
        "it stores, C*V**2/2, then for how many seconds that energy powers a 2 mW LED.",
        (0.0625,), tools=("evaluate_expression",),
    ),
    Task("who", "none", "Hi! Who are you?", words=r"assistant|\bAI\b|Qwen|help"),
    Task("capital", "none", "What is the capital of France?", words=r"Paris"),
    Task("author", "none", "Who wrote Romeo and Juliet?", words=r"Shakespeare"),
    Task(
        "scalar_vector", "none", "In one sentence: what is the difference between a scalar "
        "and a vector?",
        words=r"direction",
    ),
    Task(
        "thanks", "none", "Thanks, that helps a lot!",
        words=r"welcome|glad|happy|pleasure|anytime",
    ),
)  # fmt: skip

_MINUS = "\u2212"
_POWER = re.compile(r"\s*(?:\u00d7|x|\*|\\times|\u00b7|\\cdot)\s*10\s*\^\s*\{?\s*([-+]?\d+)\s*\}?")
_BARE_POWER = re.compile(r"(?<![\d.])10\s*\^\s*\{?\s*([-+]?\d+)\s*\}?")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def numbers_in(text: str) -> Iterator[float]:
    """Every number written in ``text``, including ``2.1 x 10^-6``, ``2.1 \\times 10^{-6}``
    (and the Unicode times sign and minus) and ``1,234.5``; a percentage also as its
    fraction."""
    text = text.replace(_MINUS, "-").replace("\u2009", "")
    text = _POWER.sub(lambda m: "e" + m.group(1), text)
    text = _BARE_POWER.sub(lambda m: "1e" + m.group(1), text)
    text = _THOUSANDS.sub("", text)
    for match in _NUMBER.finditer(text):
        try:
            value = float(match.group())
        except ValueError:
            continue
        yield value
        if text[match.end() : match.end() + 2].lstrip().startswith("%"):
            yield value / 100  # "0.13 %" is 0.0013: BFCL's probabilities are asked as odds


def is_correct(task: Task, answer: str) -> bool:
    """Whether ``answer`` holds every expected number (or matches the expected words)
    and names nothing ``wrong``."""
    if not answer.strip():
        return False
    if task.wrong and re.search(task.wrong, answer, re.IGNORECASE):
        return False
    if task.expected:
        found = list(numbers_in(answer))
        return all(
            any(math.isclose(value, want, rel_tol=REL_TOL) for value in found)
            for want in task.expected
        )
    return re.search(task.words, answer, re.IGNORECASE) is not None
