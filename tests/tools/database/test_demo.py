"""The demo music store (``url: demo``): the shipped file is what the generator writes,
it opens read-only from one settings entry, and the pack's tools answer questions
whose answers this test works out with sqlite3 on the same file."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from proxy.config import load_settings
from proxy.errors import ToolInputRejected
from proxy.tools.packs.database.catalog import DatabasePack
from proxy.tools.packs.database.demo import DEMO
from proxy.tools.packs.database.demo.generate import generate

TABLES = {"genres", "artists", "albums", "tracks", "customers", "invoices", "invoice_lines"}


def rows(sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(f"file:{DEMO}?mode=ro", uri=True) as connection:
        return connection.execute(sql).fetchall()


@pytest.fixture(scope="module")
def pack() -> Iterator[DatabasePack]:
    settings = load_settings(packs={"database": [{"name": "shop", "url": "demo"}]})
    opened = DatabasePack.open(settings.packs.database)
    yield opened
    opened.close()


async def call(pack: DatabasePack, tool: str, **arguments: Any) -> Any:
    return await pack.functions()[f"shop_{tool}"](arguments)


def test_the_generator_writes_the_shipped_database(tmp_path: Path) -> None:
    fresh = tmp_path / "shop.sqlite"
    generate(fresh)
    shipped = sqlite3.connect(f"file:{DEMO}?mode=ro", uri=True)
    written = sqlite3.connect(fresh)
    try:
        assert list(written.iterdump()) == list(shipped.iterdump())
    finally:
        shipped.close()
        written.close()


def test_a_few_thousand_rows_and_totals_that_add_up() -> None:
    counts = {table: rows(f"SELECT count(*) FROM {table}")[0][0] for table in TABLES}
    assert 3000 <= sum(counts.values()) <= 10_000
    assert min(counts.values()) >= 10
    off = rows(
        "SELECT count(*) FROM invoices i WHERE abs(i.total - (SELECT sum(unit_price * "
        "quantity) FROM invoice_lines l WHERE l.invoice_id = i.invoice_id)) > 0.005"
    )
    assert off == [(0,)]


async def test_list_tables_shows_the_schema(pack: DatabasePack) -> None:
    answer = await call(pack, "list_tables")
    assert {table["name"] for table in answer["tables"]} == TABLES


async def test_customers_in_germany(pack: DatabasePack) -> None:
    (want,) = rows("SELECT count(*) FROM customers WHERE country = 'Germany'")[0]
    found = await call(pack, "find_columns_containing_value", value="germany", fuzzy=True)
    assert {"table": "customers", "column": "country"}.items() <= found["matches"][0].items()
    distinct = await call(pack, "get_distinct_values", table="customers", column="country")
    counts = {value["value"]: value["count"] for value in distinct["values"]}
    assert counts["Germany"] == want


async def test_which_german_customer_bought_the_most_jazz(pack: DatabasePack) -> None:
    sql = (
        "SELECT c.first_name || ' ' || c.last_name, sum(l.quantity) AS n FROM customers c "
        "JOIN invoices i ON i.customer_id = c.customer_id "
        "JOIN invoice_lines l ON l.invoice_id = i.invoice_id "
        "JOIN tracks t ON t.track_id = l.track_id JOIN genres g ON g.genre_id = t.genre_id "
        "WHERE c.country = 'Germany' AND g.name = 'Jazz' "
        "GROUP BY c.customer_id ORDER BY n DESC, c.customer_id"
    )
    want = [list(row) for row in rows(sql)]
    answer = await call(pack, "run_select", sql=sql)
    assert answer["rows"] == want[: len(answer["rows"])]
    assert want[0][1] > want[1][1]  # one clear winner


async def test_the_genre_with_the_most_tracks_wins_clearly(pack: DatabasePack) -> None:
    sql = (
        "SELECT g.name, count(*) AS n FROM tracks t JOIN genres g ON g.genre_id = t.genre_id "
        "GROUP BY g.name ORDER BY n DESC"
    )
    answer = await call(pack, "run_select", sql=sql)
    assert answer["rows"][0] == list(rows(sql)[0])
    assert answer["rows"][0][1] > answer["rows"][1][1]


async def test_sales_to_france_and_the_date_format(pack: DatabasePack) -> None:
    where = "customer_id IN (SELECT customer_id FROM customers WHERE country = 'France')"
    (want,) = rows(f"SELECT round(sum(total), 2) FROM invoices WHERE {where}")[0]
    answer = await call(pack, "run_select", sql=f"SELECT sum(total) FROM invoices WHERE {where}")
    assert answer["rows"][0][0] == pytest.approx(want)
    checked = await call(pack, "check_where", table="invoices", where=where)
    assert checked["valid"] is True
    assert checked["rows"] == rows(f"SELECT count(*) FROM invoices WHERE {where}")[0][0]
    dates = await call(pack, "get_date_format", table="invoices", column="invoice_date")
    assert "%Y-%m-%d" in dates["formats"]


async def test_nothing_writes_to_the_demo(pack: DatabasePack) -> None:
    before = DEMO.stat().st_mtime_ns
    with pytest.raises(ToolInputRejected):
        await call(pack, "run_select", sql="DELETE FROM customers")
    assert rows("SELECT count(*) FROM customers")[0][0] == 200
    assert DEMO.stat().st_mtime_ns == before
