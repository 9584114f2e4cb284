"""``toolgraph catalog …`` / ``toolgraph graph …`` through the real entry point."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from graph_store.neo4j_store import Neo4jStore
from proxy.cli import main
from proxy.tools.packs.math.catalog import builtin_tools
from testing.fake_upstream import FakeUpstream, Script
from tests.graph_store.conftest import FIXTURES


def _hotel_catalog(tmp_path: Path) -> Path:
    tools = [
        {
            "name": name,
            "description": name,
            "parameters": {"type": "object", "properties": {}, "required": []},
        }
        for name in ("search_hotels", "hotel_details", "book_hotel", "hotel_reviews", "get_weather")
    ]
    path = tmp_path / "hotels.json"
    path.write_text(json.dumps(tools))
    return path


def test_import_build_and_explore(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "import", str(_hotel_catalog(tmp_path))]) == 0
    assert "5 tools imported (5 new, 0 updated)" in capsys.readouterr().out
    assert main(["graph", "build", "--calls", str(FIXTURES / "calls.jsonl")]) == 1  # line 8
    built = capsys.readouterr()
    assert "edges: 3 from calls" in built.out
    assert "calls.jsonl: line 8: needs a 'calls' list" in built.err
    assert main(["graph", "neighbors", "search_hotels"]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [(row[0], row[3]) for row in rows] == [
        ("SEQUENTIAL", "hotel_details"),
        ("SEQUENTIAL", "hotel_reviews"),
    ]
    assert main(["graph", "neighbors", "search_hotels", "--hops", "2"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "1\thotel_details",
        "1\thotel_reviews",
        "2\tbook_hotel",
    ]
    assert main(["graph", "stats"]) == 0
    assert "edges STRONG_DEP 0, WEAK_DEP 0, SEQUENTIAL 3" in capsys.readouterr().out


def test_errors_are_one_line_and_a_non_zero_exit(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "show", "nope"]) == 1
    assert capsys.readouterr().err == "toolgraph: no tool named or with id 'nope'\n"
    assert main(["catalog", "import", str(FIXTURES / "broken.yaml")]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [f"error: {FIXTURES / 'broken.yaml'}: line 3: not valid YAML"]


def test_a_store_that_cannot_be_read_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "graph").mkdir()
    (tmp_path / "graph" / "graph.bin").write_bytes(b"garbage")
    monkeypatch.setenv("TOOLGRAPH_DATA_DIR", str(tmp_path))
    assert main(["graph", "stats"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("toolgraph: cannot read the graph file")


def test_push_and_pull_through_neo4j(
    tmp_path: Path,
    bolt_uri: str,
    neo4j_store: Neo4jStore,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    neo4j_store.clear()
    main(["catalog", "import", str(_hotel_catalog(tmp_path))])
    main(["graph", "build", "--calls", str(FIXTURES / "calls.jsonl")])
    capsys.readouterr()
    assert main(["graph", "push", "--neo4j", bolt_uri]) == 0
    # the five imported and the built-in pack, which the commands see as the proxy does
    copied = f"copied {5 + len(builtin_tools())} tools, 3 edges\n"
    assert capsys.readouterr().out == copied
    assert len(neo4j_store.edges()) == 3
    monkeypatch.setenv("TOOLGRAPH_DATA_DIR", str(tmp_path / "elsewhere"))
    assert main(["graph", "pull", "--neo4j", bolt_uri]) == 0
    assert capsys.readouterr().out == copied
    neo4j_store.clear()


def test_llm_deps_through_the_command_line(
    tmp_path: Path,
    upstream: FakeUpstream,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows = [
        {
            "api_name": "createTicket",
            "api_description": "Open a ticket",
            "field": "IT/Support",
            "parameters": {"title": {"type": "str", "description": "Title"}},
            "required": ["title"],
            "responses": {"ticket_id": {"type": "str", "description": "The ticket's id"}},
        },
        {
            "api_name": "closeTicket",
            "api_description": "Close a ticket",
            "field": "IT/Support",
            "parameters": {"ticket_id": {"type": "str", "description": "The ticket's id"}},
            "required": ["ticket_id"],
            "responses": {},
        },
    ]
    catalog = tmp_path / "tool.jsonl"
    catalog.write_text("".join(json.dumps(row) + "\n" for row in rows))
    monkeypatch.setenv("TOOLGRAPH_UPSTREAM_BASE_URL", upstream.base_url)
    assert main(["catalog", "import", str(catalog)]) == 0
    assert main(["graph", "build", "--schema-deps"]) == 0
    assert main(["graph", "build", "--llm-deps"]) == 2  # no model named anywhere
    assert "needs --llm-model" in capsys.readouterr().err
    upstream.enqueue(Script(text='{"verdicts": [{"edge": 0, "keep": false, "why": "no"}]}'))
    assert main(["graph", "build", "--llm-deps", "--llm-model", "judge"]) == 0
    assert "the model kept 0 and rejected 1" in capsys.readouterr().out
    log = Path(os.environ["TOOLGRAPH_DATA_DIR"]) / "graph" / "llm_verdicts.jsonl"
    [verdict] = [json.loads(line) for line in log.read_text().splitlines()]
    assert (verdict["keep"], verdict["why"], verdict["reason"]) == (
        False,
        "no",
        "ticket_id -> ticket_id",
    )
    assert main(["graph", "stats"]) == 0
    assert "STRONG_DEP 0, WEAK_DEP 0" in capsys.readouterr().out
