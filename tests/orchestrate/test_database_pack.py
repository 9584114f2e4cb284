"""Orchestrate mode over a database named in one settings entry: a question whose plan
is find_columns_containing_value → get_distinct_values → run_select, through the
official SDK, against SQLite and a real PostgreSQL server; the fake upstream plays
the model (testing/brain.py)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any

import pytest

from testing.brain import Brain, plan_of
from testing.fake_upstream import FakeUpstream
from testing.postgres_server import PostgresServer
from tests.conftest import StartProxy
from tests.orchestrate.conftest import ORCHESTRATE, sdk, trace, user
from tests.tools.database.music import build_postgres, build_sqlite

QUESTION = "Which customers in Germany bought the most jazz tracks?"
SQL = (
    "SELECT c.first_name || ' ' || c.last_name AS customer, SUM(l.quantity) AS jazz "
    "FROM customers c JOIN invoices i ON i.customer_id = c.customer_id "
    "JOIN invoice_lines l ON l.invoice_id = i.invoice_id "
    "JOIN tracks t ON t.track_id = l.track_id JOIN genres g ON g.genre_id = t.genre_id "
    "WHERE c.country = 'Germany' AND g.name = 'Jazz' "
    "GROUP BY c.first_name, c.last_name ORDER BY jazz DESC"
)


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    if request.param == "sqlite":
        return build_sqlite(tmp_path / "music.db")
    server: PostgresServer = request.getfixturevalue("postgres")
    return build_postgres(server, database=f"music_{tmp_path.name.lower()[-20:].strip('_')}")


def plan_the_jazz_question(brain: Brain) -> None:
    brain.plan = plan_of(
        ("Find which column of the music database holds the country Germany", []),
        ("Get the distinct genre names of the music database", ["s1"]),
        (
            "Run a SELECT on the music database counting jazz tracks per German customer",
            ["s1", "s2"],
        ),
    )
    brain.tools = {
        "holds the country": "music_find_columns_containing_value",
        "distinct genre": "music_get_distinct_values",
        "Run a SELECT": "music_run_select",
    }
    brain.arguments = {
        "holds the country": {"value": "Germany"},
        "distinct genre": {"table": "genres", "column": "name"},
        "Run a SELECT": {"sql": SQL},
    }


def test_a_database_question_is_answered_through_the_packs_tools(
    start_proxy: StartProxy, brain: Brain, database_url: str
) -> None:
    server = start_proxy(
        packs={
            "database": [{"name": "music", "url": database_url, "description": "a music store"}]
        },
        planner={"policy": "llm", "top_k": 10, "memory_k": 0},
        orchestrate={"builtin_tools": False},
    )
    plan_the_jazz_question(brain)
    raw = sdk(server, timeout=300).chat.completions.with_raw_response.create(
        model="fake-model", messages=user(QUESTION), extra_body=ORCHESTRATE
    )
    answer = raw.parse().choices[0].message.content or ""
    calls = {c["node"]: c for c in trace(server, raw.headers["x-toolgraph-trace-id"])["calls"]}
    assert [calls[n]["tool"] for n in ("s1", "s2", "s3")] == [
        "music_find_columns_containing_value",
        "music_get_distinct_values",
        "music_run_select",
    ]
    assert all(call["outcome"] == "ok" for call in calls.values()), calls
    columns = {(m["table"], m["column"]) for m in calls["s1"]["output"]["matches"]}
    assert ("customers", "country") in columns
    genres = {v["value"] for v in calls["s2"]["output"]["values"]}
    assert genres == {"Jazz", "Rock", "Classical"}
    assert calls["s3"]["output"]["rows"] == [["Hannah Schmidt", 4], ["Lukas Weber", 1]]
    assert "Hannah Schmidt" in answer  # the answering call was shown the rows


def test_a_write_is_refused_and_the_refusal_is_in_the_trace(
    start_proxy: StartProxy, brain: Brain, tmp_path: Any
) -> None:
    url = build_sqlite(tmp_path / "music.db")
    server = start_proxy(
        packs={"database": [{"name": "music", "url": url}]},
        planner={"policy": "llm", "top_k": 10, "memory_k": 0},
        orchestrate={"builtin_tools": False},
    )
    brain.one_step(
        "Run a SELECT on the music database", "Run a SELECT", "music_run_select",
        {"sql": "DELETE FROM customers"},
    )  # fmt: skip
    raw = sdk(server, timeout=300).chat.completions.with_raw_response.create(
        model="fake-model", messages=user("Delete every customer"), extra_body=ORCHESTRATE
    )
    (call,) = trace(server, raw.headers["x-toolgraph-trace-id"])["calls"]
    assert call["outcome"] == "failed"
    assert "only a SELECT may run here, not DELETE" in call["error"]
    with sqlite3.connect(tmp_path / "music.db") as check:
        assert check.execute("SELECT count(*) FROM customers").fetchone() == (5,)


@dataclass
class CorrectingBrain(Brain):
    """Writes a SELECT with a misspelt column first, and the right one once told."""

    selects: list[str] = field(default_factory=list)

    def arguments_for(self, task: str) -> Any:
        if "Run a SELECT" in task and self.selects:
            return {"sql": self.selects.pop(0)}
        return super().arguments_for(task)


def test_the_databases_error_goes_back_to_the_argument_writer(
    start_proxy: StartProxy, upstream: FakeUpstream, tmp_path: Any
) -> None:
    brain = CorrectingBrain(
        selects=[
            "SELECT nme FROM genres ORDER BY genre_id",
            "SELECT name FROM genres ORDER BY genre_id",
        ]
    )
    upstream.responder = brain
    url = build_sqlite(tmp_path / "music.db")
    server = start_proxy(
        packs={"database": [{"name": "music", "url": url}]},
        planner={"policy": "llm", "top_k": 10, "memory_k": 0},
        orchestrate={"builtin_tools": False},
    )
    brain.one_step(
        "Run a SELECT on the music database listing the genres",
        "Run a SELECT",
        "music_run_select",
        {},
    )
    raw = sdk(server, timeout=300).chat.completions.with_raw_response.create(
        model="fake-model", messages=user("Which genres are there?"), extra_body=ORCHESTRATE
    )
    (call,) = trace(server, raw.headers["x-toolgraph-trace-id"])["calls"]
    assert call["outcome"] == "ok"
    assert call["output"]["rows"] == [["Jazz"], ["Rock"], ["Classical"]]
    assert call["attempts"] == 2
    rewrites = [
        request.body["messages"]
        for request in upstream.requests
        if request.body and len(request.body.get("messages", [])) == 4
    ]
    (messages,) = rewrites
    assert json.loads(messages[2]["content"]) == {"sql": "SELECT nme FROM genres ORDER BY genre_id"}
    assert "no such column: nme" in messages[3]["content"]
