"""The pack suite: questions over the database pack's demo music store and the
knowledge-graph pack's demo geography graph, and the packs that answer them.

``python -m eval.e2e --suite packs`` runs these tasks instead of the default 28:

* ``database`` (7): questions over ``url: demo`` (:mod:`proxy.tools.packs.database.demo`)
  that need one to three of the pack's calls (find which column holds a value, look
  at its distinct values or date format, run one SELECT): a count, a sum, a ranking
  across three to five joined tables. No model knows these answers by heart: the
  data is written for the project.
* ``graph`` (3): questions over ``path: demo`` (the geography graph) that need two or
  three calls passing entity variables (find, follow a relation, argmax or
  intersect). The demo's figures are near the real ones, so a model may know these
  answers; they test the variables' path, not the model's ignorance.

Every expected answer was worked out with sqlite3 and by hand on the shipped data, and
``tests/eval/test_e2e_packs.py`` checks each against the data again.

The catalog of size N holds the five built-in tools, the packs' 15 tools (7 of the
database ``shop``, 8 of the graph ``geo``) and N - 20 ToolBench distractors (the
same seeded pool as the default suite's): N is still the number of tools offered,
and the smallest catalog is 20.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from eval.e2e.tasks import Task
from graph_store.models import Tool
from proxy.config import DatabasePackSettings, KnowledgeGraphPackSettings
from proxy.tools.builtin import PythonTools
from proxy.tools.packs.database.catalog import DatabasePack, database_tools
from proxy.tools.packs.knowledge_graph.catalog import KnowledgeGraphPack, knowledge_graph_tools

SIZES = (20, 100, 1000)
#: The ``packs`` section of the proxy's settings: the two demos, one entry each.
PACKS: dict[str, Any] = {
    "database": [
        {
            "name": "shop",
            "url": "demo",
            "description": "a music store's catalog and sales",
        }
    ],
    "knowledge_graph": [
        {"name": "geo", "path": "demo", "description": "countries, cities, rivers and mountains"}
    ],
}

PACK_TASKS: tuple[Task, ...] = (
    Task(
        "db_customers_germany", "database", "How many of the music shop's customers live in "
        "Germany?", (29.0,), tools=("shop_run_select",),
    ),
    Task(
        "db_top_genre", "database", "Which genre has the most tracks in the music shop's "
        "catalog?", words=r"\brock\b", tools=("shop_run_select",),
    ),
    Task(
        "db_sales_france", "database", "What is the total of all invoices of the music "
        "shop's customers in France?", (498.03,), tools=("shop_run_select",),
    ),
    Task(
        "db_jazz_albums", "database", "How many albums of the music shop are jazz albums "
        "(albums whose tracks are in the Jazz genre)?", (13.0,), tools=("shop_run_select",),
    ),
    Task(
        "db_sales_2023", "database", "What were the music shop's total sales in 2023, the "
        "sum of the totals of that year's invoices?", (1008.57,),
        tools=("shop_get_date_format", "shop_run_select"),
    ),
    Task(
        "db_best_album_artist", "database", "Which artist made the music shop's best-selling "
        "album, the album with the most units sold over all invoice lines?",
        words=r"winter orchestra", tools=("shop_run_select",),
    ),
    Task(
        "db_germany_jazz", "database", "Which customer in Germany bought the most jazz "
        "tracks from the music shop?", words=r"omar keller",
        tools=("shop_find_columns_containing_value", "shop_run_select"),
    ),
    Task(
        "geo_neighbour", "graph", "According to the geography knowledge graph, which "
        "country bordering Germany has the largest population?", words=r"france",
        tools=("geo_find_entities", "geo_get_neighbors", "geo_argmax"),
    ),
    Task(
        "geo_neighbours_count", "graph", "According to the geography knowledge graph, how "
        "many countries border Germany?", (9.0,),
        tools=("geo_find_entities", "geo_get_neighbors", "geo_count"),
    ),
    Task(
        "geo_rhine_danube", "graph", "According to the geography knowledge graph, through "
        "which countries do both the Rhine and the Danube flow?",
        words=r"(?s)(?=.*germany)(?=.*austria)",
        tools=("geo_find_entities", "geo_get_neighbors", "geo_intersection"),
        # a country on one of the two rivers only: "Germany, Austria, Switzerland" is wrong
        wrong=r"switzerland|liechtenstein|france|netherlands|hungary|slovakia|croatia|serbia"
        r"|romania|bulgaria|moldova|ukraine",
    ),
)  # fmt: skip


def _databases() -> list[DatabasePackSettings]:
    return [DatabasePackSettings(**entry) for entry in PACKS["database"]]


def _graphs() -> list[KnowledgeGraphPackSettings]:
    return [KnowledgeGraphPackSettings(**entry) for entry in PACKS["knowledge_graph"]]


def pack_tools() -> list[Tool]:
    """The packs' catalog records, as the proxy seeds them (same ids)."""
    return database_tools(_databases()) + knowledge_graph_tools(_graphs())


@asynccontextmanager
async def pack_functions(runner: PythonTools) -> AsyncIterator[PythonTools]:
    """``runner`` with the packs' in-process tools added, for the all-tools client."""
    databases, graphs = DatabasePack.open(_databases()), KnowledgeGraphPack.open(_graphs())
    runner.functions.update(databases.functions() | graphs.functions())
    try:
        yield runner
    finally:
        await graphs.aclose()
        databases.close()
