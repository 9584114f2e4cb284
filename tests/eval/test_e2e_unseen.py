"""The held-out questions: two disjoint fixed parts, and answers the built-in tools give."""

from __future__ import annotations

from collections import Counter

import pytest
from pydantic import JsonValue

from eval.e2e.__main__ import suite_tasks
from eval.e2e.tasks import TASKS, Task, is_correct
from eval.e2e.unseen import ASIDE, DEV
from proxy.tools.packs.math.calculus import (
    calculate_derivative,
    calculate_integral,
    evaluate_expression,
)
from proxy.tools.packs.math.simulation import run_simulation
from proxy.tools.packs.math.vectors import vector_operation


def test_parts_are_disjoint_from_each_other_and_the_suite() -> None:
    ids = [task.id for task in (*TASKS, *DEV, *ASIDE)]
    assert len(set(ids)) == len(ids)
    assert all(bool(task.expected) != bool(task.words) for task in (*DEV, *ASIDE))


def test_a_third_of_each_kind_is_aside() -> None:
    dev, aside = Counter(t.kind for t in DEV), Counter(t.kind for t in ASIDE)
    assert set(dev) == set(aside) == {"single", "multi", "none"}
    for kind, count in aside.items():
        assert 0.25 <= count / (count + dev[kind]) <= 0.4, kind


def test_the_suites_select_their_part() -> None:
    assert suite_tasks("dev", None) == DEV
    assert suite_tasks("aside", None) == ASIDE


def _value(result: JsonValue) -> str:
    return str(result)


CALLS: list[tuple[str, JsonValue]] = [
    ("u_second_derivative", calculate_derivative(
        {"expression": "x**5 - 3*x**2", "order": 2, "at": 1.5})),
    ("u_integral_sin2", calculate_integral({"expression": "sin(x)**2", "lower": 0, "upper": 2})),
    ("u_angle", vector_operation({"operation": "angle", "a": [2, -1, 0], "b": [1, 3, 2]})),
    ("u_charge_nc", run_simulation({"sim_type": "point_charges", "params": {
        "charges": [{"q": 5e-9, "x": 0, "y": 0, "z": 0}], "points": [[0, 0, 3]]}})),
    ("u_de_broglie", evaluate_expression({"expression": "h/(m_e*2.0e6)"})),
    ("u_wire_10a", run_simulation({"sim_type": "wire_field", "params": {
        "wires": [{"current": 10, "x": 0, "y": 0}], "points": [[0.2, 0]]}})),
    ("u_cross", vector_operation({"operation": "cross", "a": [3, -1, 2], "b": [0, 4, -5]})),
    ("u_lc_frequency", evaluate_expression({"expression": "1/(2*pi*sqrt(2e-3*50e-9))"})),
    ("u_integral_times_slope", evaluate_expression({"expression": "63*12"})),
    ("u_sum_magnitude", vector_operation({"operation": "magnitude", "a": [4, 2, 3]})),
    ("u_resistor_power", evaluate_expression({"expression": "(3e-3*4.7e3)**2/4.7e3"})),
]  # fmt: skip


@pytest.mark.parametrize(("task_id", "result"), CALLS, ids=[c[0] for c in CALLS])
def test_the_expected_numbers_are_what_the_right_call_returns(
    task_id: str, result: JsonValue
) -> None:
    task: Task = next(t for t in (*DEV, *ASIDE) if t.id == task_id)
    assert is_correct(task, _value(result).replace("'", " "))
