"""Where a chosen parameter's values are found in earlier outputs, and how an answer's
number becomes one of them."""

from __future__ import annotations

import pytest
from pydantic import JsonValue

from proxy.execute.choices import MAX_SHOWN, offered_choices, pick_choices, values_at

TABLES: JsonValue = {
    "tables": [
        {"name": "albums", "columns": [{"name": "album_id"}, {"name": "title"}]},
        {"name": "artists", "columns": [{"name": "artist_id"}, {"name": "name"}]},
    ]
}


@pytest.mark.parametrize(
    ("output", "path", "values"),
    [
        (TABLES, "tables[].name", ["albums", "artists"]),
        (TABLES, "tables[].columns[].name", ["album_id", "title", "artist_id", "name"]),
        ({"relations": ["a", "^b", 3]}, "relations", ["a", "^b"]),
        ({"attributes": {"population": 5, "area": 2}}, "attributes", ["population", "area"]),
        ({"variable": "#2", "count": 4}, "variable", ["#2"]),
        ({"variable": "#2"}, "relations", []),
        ("plain text", "variable", []),
    ],
)
def test_values_are_read_at_a_path(output: JsonValue, path: str, values: list[str]) -> None:
    assert values_at(output, path) == values


def test_choices_come_from_every_output_once_and_skip_fixed_parameters() -> None:
    paths = {"table": ("tables[].name", "matches[].table"), "column": ("matches[].column",)}
    outputs: list[JsonValue] = [
        TABLES,
        {"matches": [{"table": "artists", "column": "name"}, {"table": "tracks", "column": "x"}]},
    ]
    assert offered_choices(paths, outputs, {}) == {
        "table": ["albums", "artists", "tracks"],
        "column": ["name", "x"],
    }
    assert offered_choices(paths, outputs, {"table": "albums"}) == {"column": ["name", "x"]}
    assert offered_choices(paths, [{"rows": []}], {}) == {}


def test_a_number_past_the_shown_list_is_refused_and_a_value_written_out_is_kept() -> None:
    values = [f"v{i}" for i in range(MAX_SHOWN + 20)]
    picked, problems = pick_choices({"p": MAX_SHOWN + 1, "q": 2.0, "r": True}, {"p": values})
    assert picked == {"q": 2.0, "r": True}  # only chosen parameters are mapped
    assert problems == [
        f"p: {MAX_SHOWN + 1} is not one of the numbers offered; answer with the number "
        f"(1 to {MAX_SHOWN}) of one of the values listed for p"
    ]
    assert pick_choices({"p": f"v{MAX_SHOWN + 5}"}, {"p": values}) == (
        {"p": f"v{MAX_SHOWN + 5}"},
        [],
    )
    assert pick_choices({"p": 3.0}, {"p": values}) == ({"p": "v2"}, [])
    assert pick_choices({"p": "elsewhere"}, {"p": values}) == ({"p": "elsewhere"}, [])
    assert pick_choices({"p": " 2 "}, {"p": values}) == ({"p": "v1"}, [])
    _, refused = pick_choices({"p": [1]}, {"p": values})
    assert refused[0].startswith("p: [1] is not one of the numbers offered")
