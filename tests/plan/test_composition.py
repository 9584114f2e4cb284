"""Which operations of a tool's operation selector a request names (proxy/plan/composition)."""

from __future__ import annotations

import pytest

from proxy.plan.composition import composition_steps, operations_named
from proxy.tools.packs.math.catalog import builtin_tools

VECTORS = next(tool for tool in builtin_tools() if tool.name == "vector_operation")

#: Requests naming two of the selector's operations, by verb or by noun, and the order
#: they run in (innermost first).
COMPOSITIONS = [
    ("the magnitude of the sum of [1, 2] and [3, 4]", ["add", "magnitude"]),
    ("normalize the difference of [1, 2] and [3, 4]", ["subtract", "normalize"]),
    ("the angle between a and the cross product of b and c", ["cross", "angle"]),
    ("after adding [1, 2] to [3, 4], take the magnitude", ["add", "magnitude"]),
    ("add [1, 2] and [3, 4], then take the magnitude", ["add", "magnitude"]),
    ("normalize a, then the angle between it and b", ["normalize", "angle"]),
    ("the angle between b and the normalized a", ["normalize", "angle"]),
]


@pytest.mark.parametrize(("text", "steps"), COMPOSITIONS)
def test_two_operations_named_by_verb_or_noun(text: str, steps: list[str]) -> None:
    assert operations_named(VECTORS, text) == {"operation": steps}


@pytest.mark.parametrize(
    "text",
    [
        "the dot product of [1, 2] and [3, 4]",  # "product" is not taken for a verb
        "the sum of [1, 2] and [3, 4]",
        "the magnitude of [3, 4]",
        "summarise [3, 4] and normalize it",  # a noun counts as a whole word only
    ],
)
def test_one_operation_named_is_not_a_composition(text: str) -> None:
    assert operations_named(VECTORS, text) == {}


@pytest.mark.parametrize(("text", "steps"), COMPOSITIONS)
def test_a_composition_runs_innermost_first(text: str, steps: list[str]) -> None:
    assert composition_steps(VECTORS, text) == ("operation", steps)


def test_one_operation_is_no_composition() -> None:
    assert composition_steps(VECTORS, "the magnitude of [3, 4]") is None
