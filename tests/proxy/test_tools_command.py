"""``toolgraph tools call``: any catalog tool from a shell, through the executor."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from proxy.cli import main
from tests.orchestrate.conftest import http_tool, seed_catalog
from tests.tools.database.music import build_sqlite


def config(tmp_path: Path, **settings: object) -> str:
    path = tmp_path / "toolgraph.yaml"
    path.write_text(yaml.safe_dump(settings), encoding="utf-8")
    return str(path)


def test_a_built_in_tool_prints_its_output_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(
        ["tools", "call", "evaluate_expression", "--arguments", '{"expression": "6 * 7"}']
    )
    out = capsys.readouterr().out
    assert status == 0
    assert json.loads(out)["value"] == 42


def test_invalid_arguments_are_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["tools", "call", "evaluate_expression", "--arguments", '{"expr": "1"}'])
    captured = capsys.readouterr()
    assert status == 1
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("toolgraph: evaluate_expression failed: ")
    assert "'expression' is a required property" in lines[0]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["tools", "call", "no_such_tool"], "no tool named no_such_tool"),
        (
            ["tools", "call", "evaluate_expression", "--arguments", "{not json"],
            "--arguments is not JSON",
        ),
        (["tools", "call", "evaluate_expression", "--arguments", "[1]"], "must be a JSON object"),
    ],
)
def test_usage_errors_exit_2(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert says in capsys.readouterr().err


def test_a_database_tool_from_the_config_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = build_sqlite(tmp_path / "music.db")
    settings = config(tmp_path, packs={"database": [{"name": "music", "url": url}]})
    sql = "SELECT name FROM genres ORDER BY genre_id"
    status = main(
        [
            "tools",
            "call",
            "music_run_select",
            "--config",
            settings,
            "--arguments",
            json.dumps({"sql": sql}),
        ]
    )
    assert status == 0
    assert json.loads(capsys.readouterr().out)["rows"] == [["Jazz"], ["Rock"], ["Classical"]]
    status = main(
        [
            "tools",
            "call",
            "music_run_select",
            "--config",
            settings,
            "--arguments",
            '{"sql": "DROP TABLE genres"}',
        ]
    )
    assert status == 1
    assert "only a SELECT may run here, not DROP" in capsys.readouterr().err


def test_compress_prints_the_compressed_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = build_sqlite(tmp_path / "music.db")
    settings = config(
        tmp_path,
        packs={"database": [{"name": "music", "url": url}]},
        executor={"compress_chars": 200},
    )
    arguments = json.dumps({"sql": "SELECT * FROM invoice_lines, genres"})
    argv = ["tools", "call", "music_run_select", "--config", settings, "--arguments", arguments]
    assert main(argv) == 0
    full = capsys.readouterr().out
    assert main([*argv, "--compress"]) == 0
    compressed = capsys.readouterr().out
    assert len(json.dumps(json.loads(full), separators=(",", ":"))) > 200
    assert len(compressed.strip()) <= 200 < len(full)


def test_a_catalog_http_tool_meets_the_egress_policy(capsys: pytest.CaptureFixture[str]) -> None:
    """A tool imported into the store, aimed at a loopback address: the executor's
    policy refuses it, as it would in orchestrate mode."""
    seed_catalog([http_tool("local_lookup", "Looks things up", "http://127.0.0.1:9/lookup")])
    assert os.environ["TOOLGRAPH_DATA_DIR"]
    status = main(["tools", "call", "local_lookup", "--arguments", '{"label": "x"}'])
    assert status == 1
    err = capsys.readouterr().err
    assert err.startswith("toolgraph: local_lookup failed: ")
    assert "127.0.0.1" in err or "private" in err


def test_a_knowledge_graph_tool_from_the_config_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    settings = config(tmp_path, packs={"knowledge_graph": [{"name": "geo", "path": "demo"}]})
    geo = "http://example.org/geo/"
    arguments = json.dumps({"variable": geo + "Spain", "relation": geo + "borders"})
    status = main(
        ["tools", "call", "geo_get_neighbors", "--config", settings, "--arguments", arguments]
    )
    assert status == 0
    reached = json.loads(capsys.readouterr().out)
    assert {entity["name"] for entity in reached["entities"]} == {"France", "Portugal"}
    # One call is one request: a variable of an earlier shell call does not exist.
    status = main(
        ["tools", "call", "geo_count", "--config", settings, "--arguments", '{"variable": "#0"}']
    )
    assert status == 1
    assert "no variable '#0' in this request" in capsys.readouterr().err
