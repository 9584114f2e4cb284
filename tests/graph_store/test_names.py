from __future__ import annotations

import pytest
from pydantic import ValidationError

from graph_store.names import is_valid_name, normalise_name, tool_id
from tests.graph_store.tools import make_tool


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("get_weather", "get_weather"),
        ("Get Weather (v2)!", "Get_Weather_v2"),
        ("café/crème", "cafe_creme"),
        ("a--b", "a--b"),
        ("__x__", "x"),
    ],
)
def test_names_fold_into_openais_alphabet(raw: str, expected: str) -> None:
    assert normalise_name(raw) == expected


def test_a_name_with_nothing_ascii_gets_a_stable_hashed_name() -> None:
    name = normalise_name("乐鱼体育")
    assert is_valid_name(name)
    assert name.startswith("tool_")
    assert name == normalise_name("乐鱼体育") != normalise_name("乐鱼")


def test_long_names_are_cut_to_64_and_stay_apart() -> None:
    first = normalise_name("x" * 70 + "_one")
    second = normalise_name("x" * 70 + "_two")
    assert len(first) == len(second) == 64
    assert first != second
    assert is_valid_name(first)


def test_ids_are_stable_and_depend_on_source_group_and_name() -> None:
    assert tool_id("toolbench", "g", "n") == tool_id("toolbench", "g", "n")
    assert (
        len(
            {
                tool_id("toolbench", "g", "n"),
                tool_id("seal", "g", "n"),
                tool_id("toolbench", "h", "n"),
            }
        )
        == 3
    )


def test_a_tool_with_an_invalid_name_is_refused() -> None:
    with pytest.raises(ValidationError, match="a-zA-Z0-9_-"):
        make_tool("has space")
