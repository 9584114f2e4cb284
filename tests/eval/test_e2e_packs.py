"""The pack suite of the end-to-end eval: its expected answers hold on the shipped
demos, its checker tells right from wrong, its catalogs count every tool offered, and
a whole run goes through all three arms against the fake upstream."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, ClassVar

import pytest

from eval.data_folder import data_folder
from eval.e2e.__main__ import config_from, parse_args
from eval.e2e.catalog import catalog
from eval.e2e.packs import PACK_TASKS, pack_tools
from eval.e2e.report import markdown, summarise
from eval.e2e.run import Row, RunConfig, run_all
from eval.e2e.tasks import PACK_SYSTEM, SYSTEM, TASKS, is_correct, system_for
from proxy.config import KnowledgeGraphPackSettings
from proxy.tools.packs.database.demo import DEMO
from proxy.tools.packs.knowledge_graph.catalog import KnowledgeGraphPack
from proxy.tools.variables import Variables, bound_variables
from testing.brain import Brain, plan_of
from testing.fake_upstream import FakeToolCall, FakeUpstream, Script
from tests.conftest import unavailable

CORPUS = data_folder() / "toolbench_stable" / "corpus.jsonl.gz"
GEO = "http://example.org/geo/"
TASK = {task.id: task for task in PACK_TASKS}
GERMANY_SQL = "SELECT count(*) FROM customers WHERE country = 'Germany'"


@pytest.fixture
def data_sets() -> None:
    """The data folder's sets these tests read: missing, a skip (a failure under CI)."""
    if not CORPUS.exists():
        unavailable(f"{CORPUS} is missing: set EVAL_DATA to the data folder")


#: Each database task's answer, worked out again here with sqlite3 on the shipped file.
DATABASE_ANSWERS = {
    "db_customers_germany": GERMANY_SQL,
    "db_top_genre": "SELECT g.name FROM tracks t JOIN genres g USING (genre_id) "
    "GROUP BY g.name ORDER BY count(*) DESC LIMIT 1",
    "db_sales_france": "SELECT round(sum(total), 2) FROM invoices JOIN customers "
    "USING (customer_id) WHERE country = 'France'",
    "db_jazz_albums": "SELECT count(DISTINCT album_id) FROM tracks JOIN genres "
    "USING (genre_id) WHERE genres.name = 'Jazz'",
    "db_sales_2023": "SELECT round(sum(total), 2) FROM invoices WHERE invoice_date "
    "BETWEEN '2023-01-01' AND '2023-12-31'",
    "db_best_album_artist": "SELECT ar.name FROM invoice_lines l JOIN tracks t USING "
    "(track_id) JOIN albums a USING (album_id) JOIN artists ar USING (artist_id) "
    "GROUP BY a.album_id ORDER BY sum(l.quantity) DESC LIMIT 1",
    "db_germany_jazz": "SELECT c.first_name || ' ' || c.last_name FROM customers c JOIN "
    "invoices USING (customer_id) JOIN invoice_lines l USING (invoice_id) JOIN tracks t "
    "USING (track_id) JOIN genres g ON g.genre_id = t.genre_id WHERE c.country = 'Germany' "
    "AND g.name = 'Jazz' GROUP BY c.customer_id ORDER BY sum(l.quantity) DESC LIMIT 1",
}


@pytest.mark.parametrize("task_id", sorted(DATABASE_ANSWERS))
def test_database_answers_hold_on_the_shipped_database(task_id: str) -> None:
    with sqlite3.connect(f"file:{DEMO}?mode=ro", uri=True) as connection:
        (value,) = connection.execute(DATABASE_ANSWERS[task_id]).fetchone()
    assert is_correct(TASK[task_id], f"The answer is {value}.")


async def test_graph_answers_hold_on_the_demo_graph() -> None:
    pack = KnowledgeGraphPack.open([KnowledgeGraphPackSettings(name="geo", path=Path("demo"))])
    tools = pack.functions()
    try:
        with bound_variables(Variables()):
            await tools["geo_find_entities"]({"name": "Germany"})  # #0
            neighbours = await tools["geo_get_neighbors"](
                {"variable": "#0", "relation": GEO + "borders"}
            )  # #1
            top = await tools["geo_argmax"]({"variable": "#1", "attribute": GEO + "population"})
            await tools["geo_find_entities"]({"name": "Rhine"})  # #3
            await tools["geo_find_entities"]({"name": "Danube"})  # #4
            await tools["geo_get_neighbors"]({"variable": "#3", "relation": GEO + "flowsThrough"})
            await tools["geo_get_neighbors"]({"variable": "#4", "relation": GEO + "flowsThrough"})
            both = await tools["geo_intersection"]({"variable1": "#5", "variable2": "#6"})
    finally:
        await pack.aclose()
    assert isinstance(neighbours, dict)
    assert isinstance(top, dict)
    assert isinstance(both, dict)
    assert is_correct(TASK["geo_neighbours_count"], f"{neighbours['count']} countries")
    assert is_correct(TASK["geo_neighbour"], json.dumps(top["entities"]))
    assert is_correct(TASK["geo_rhine_danube"], json.dumps(both["entities"]))


@pytest.mark.parametrize(
    ("task_id", "answer", "correct"),
    [
        ("db_customers_germany", "29 customers live in Germany.", True),
        ("db_customers_germany", "There are 290 customers in Germany.", False),
        ("db_sales_france", "The total is $498.03.", True),
        ("db_sales_france", "The total is 1008.57.", False),
        ("db_top_genre", "Rock has the most tracks (507).", True),
        ("db_top_genre", "Rockabilly.", False),
        ("db_best_album_artist", "It is by The Winter Orchestra.", True),
        ("db_best_album_artist", "The Winter Collective.", False),
        ("db_germany_jazz", "Omar Keller bought 8 jazz tracks.", True),
        ("db_germany_jazz", "Karin Dubois.", False),
        ("geo_rhine_danube", "Both flow through Germany\nand Austria.", True),
        ("geo_rhine_danube", "Only Germany.", False),
        ("geo_rhine_danube", "Germany, Austria, Switzerland", False),
    ],
)
def test_the_checker_on_right_and_wrong_answers(task_id: str, answer: str, correct: bool) -> None:
    assert is_correct(TASK[task_id], answer) is correct


def test_pack_tasks_have_their_own_system_prompt_and_the_default_keeps_its_own() -> None:
    assert {system_for(task) for task in PACK_TASKS} == {PACK_SYSTEM}
    assert {system_for(task) for task in TASKS} == {SYSTEM}
    assert len({task.id for task in PACK_TASKS}) == len(PACK_TASKS) == 10
    names = {tool.name for tool in pack_tools()}
    assert all(set(task.tools) <= names for task in PACK_TASKS)


@pytest.mark.usefixtures("data_sets")
def test_pack_catalogs_count_every_tool_offered() -> None:
    tools = pack_tools()
    assert len(tools) == 15
    small, large = catalog(20, CORPUS, tools), catalog(100, CORPUS, tools)
    assert len(small) == 20
    assert len(large) == 100
    assert {"shop_run_select", "geo_argmax", "evaluate_expression"} <= {t.name for t in small}
    assert [tool.name for tool in large[:20]] == [tool.name for tool in small]
    with pytest.raises(ValueError, match="at least the 20 task tools"):
        catalog(10, CORPUS, tools)


@pytest.mark.usefixtures("data_sets")
def test_the_suite_selector_and_the_unchanged_default() -> None:
    packs = config_from(parse_args(["--suite", "packs"]), "http://x/v1")
    assert packs.suite == "packs"
    assert packs.sizes == (20, 100, 1000)
    assert packs.tasks == PACK_TASKS
    assert packs.bfcl is None
    default = config_from(parse_args([]), "http://x/v1")
    assert default.suite == "default"
    assert default.sizes == (10, 100, 1000)
    assert len(default.tasks) == 28
    assert default.tasks[:18] == TASKS
    picked = config_from(parse_args(["--suite", "packs", "--tasks", "geo_neighbour"]), "u")
    assert [task.id for task in picked.tasks] == ["geo_neighbour"]


class PackBrain(Brain):
    """Orchestrate's stages as :class:`Brain` scripts them, one plan per question; and
    the all-tools arm's model, which calls the right tools one round at a time and then
    answers with the last result."""

    ROUNDS: ClassVar[dict[str, list[tuple[str, dict[str, Any]]]]] = {
        "Germany?": [("shop_run_select", {"sql": GERMANY_SQL})],
        "bordering Germany": [
            ("geo_find_entities", {"name": "Germany"}),
            ("geo_get_neighbors", {"variable": "#0", "relation": GEO + "borders"}),
            ("geo_argmax", {"variable": "#1", "attribute": GEO + "population"}),
        ],
    }

    def decomposition(self, conversation: str) -> dict[str, Any] | None:
        if "bordering Germany" in conversation:
            return plan_of(
                ("Find the entity Germany in the geo knowledge graph", []),
                ("Follow the borders relation from Germany in the geo graph", ["s1"]),
                ("Keep the neighbour with the highest population in the geo graph", ["s2"]),
            )
        return plan_of(("Run a SELECT on the shop database counting German customers", []))

    def __call__(self, request: dict[str, Any]) -> Script | None:
        if not request.get("tools"):
            return super().__call__(request)
        messages = request["messages"]
        done = [m for m in messages if m.get("role") == "tool"]
        rounds = next(r for key, r in self.ROUNDS.items() if key in messages[1]["content"])
        if len(done) == len(rounds):
            return Script(text=f"From the tools: {done[-1]['content']}")
        name, arguments = rounds[len(done)]
        return Script(tool_calls=(FakeToolCall(name, json.dumps(arguments)),))


@pytest.mark.usefixtures("data_sets")
def test_a_pack_run_goes_through_all_three_arms(
    fake_upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLGRAPH_ORCHESTRATE__GATE", "false")  # scripted, not real, requests
    brain = PackBrain(
        tools={
            "Run a SELECT": "shop_run_select",
            "Find the entity": "geo_find_entities",
            "Follow": "geo_get_neighbors",
            "highest population": "geo_argmax",
        },
        arguments={
            "Run a SELECT": {"sql": GERMANY_SQL},
            "Find the entity": {"name": "Germany"},
            "Follow": {"variable": "#0", "relation": GEO + "borders"},
            "highest population": {"variable": "#1", "attribute": GEO + "population"},
        },
    )
    fake_upstream.reset()
    fake_upstream.responder = brain
    config = RunConfig(
        fake_upstream.base_url, "fake-model", (20,), ("orchestrate", "all_tools", "no_tools"),
        (TASK["db_customers_germany"], TASK["geo_neighbour"]), CORPUS, 300.0,
        {"policy": "llm", "top_k": 10, "memory_k": 0}, None, "packs",
    )  # fmt: skip
    rows: list[Row] = []
    try:
        run_all(config, rows.append)
    finally:
        fake_upstream.reset()
    by = {(row["arm"], row["task"]): row for row in rows}
    assert len(rows) == 6
    assert not any(row["error"] for row in rows), rows
    # The plan's preconditions add the steps that give get_neighbors its relation and
    # argmax its attribute (proxy/plan/preconditions.py); the client loop calls what it
    # is told.
    assert by["orchestrate", "geo_neighbour"]["tool_calls"] == [
        "geo_find_entities",
        "geo_get_relations",
        "geo_get_neighbors",
        "geo_get_attributes",
        "geo_argmax",
    ]
    assert by["orchestrate", "db_customers_germany"]["tool_calls"] == ["shop_run_select"]
    assert by["all_tools", "geo_neighbour"]["tool_calls"] == [
        "geo_find_entities",
        "geo_get_neighbors",
        "geo_argmax",
    ]
    assert [by[arm, task]["correct"] for arm in ("orchestrate", "all_tools", "no_tools")
            for task in ("db_customers_germany", "geo_neighbour")] == [True] * 4 + [False] * 2  # fmt: skip
    assert "| arm | catalog | correct | database / graph |" in markdown(summarise(rows))
