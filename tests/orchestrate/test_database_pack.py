"""Orchestrate mode over a database named in one settings entry: a question whose plan
is find_columns_containing_value → get_distinct_values → run_select, through the
official SDK, against SQLite and a real PostgreSQL server; the fake upstream plays
the model (eval/brain.py)."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from eval.brain import Brain, plan_of
from eval.postgres_server import PostgresServer
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
    raw = sdk(server).chat.completions.with_raw_response.create(
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
    raw = sdk(server).chat.completions.with_raw_response.create(
        model="fake-model", messages=user("Delete every customer"), extra_body=ORCHESTRATE
    )
    (call,) = trace(server, raw.headers["x-toolgraph-trace-id"])["calls"]
    assert call["outcome"] == "failed"
    assert "only a SELECT may run here, not DELETE" in call["error"]
    with sqlite3.connect(tmp_path / "music.db") as check:
        assert check.execute("SELECT count(*) FROM customers").fetchone() == (5,)
