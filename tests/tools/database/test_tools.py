"""Every tool of the database pack against SQLite and a real PostgreSQL server, on
questions about the music store whose answers were worked out by hand (music.py)."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.config import DatabasePackSettings
from proxy.errors import ToolInputRejected
from proxy.execute.arguments import validate_arguments
from proxy.tools.packs.database.catalog import DatabasePack, database_tools
from retriever.catalog import catalog_documents
from retriever.config import RetrieverConfig

JAZZ_BY_GERMAN_CUSTOMER = """
SELECT c.first_name || ' ' || c.last_name AS customer, SUM(l.quantity) AS jazz_tracks
FROM customers c
JOIN invoices i ON i.customer_id = c.customer_id
JOIN invoice_lines l ON l.invoice_id = i.invoice_id
JOIN tracks t ON t.track_id = l.track_id
JOIN genres g ON g.genre_id = t.genre_id
WHERE c.country = 'Germany' AND g.name = 'Jazz'
GROUP BY c.first_name, c.last_name
ORDER BY jazz_tracks DESC
"""


async def call(pack: DatabasePack, tool: str, **arguments: Any) -> Any:
    return await pack.functions()[f"music_{tool}"](arguments)


def test_each_database_gives_seven_tools_named_after_it() -> None:
    settings = [
        DatabasePackSettings(name="music", url="sqlite:///music.db"),
        DatabasePackSettings(name="sales", url="postgresql://u:p@db/sales", description="Orders."),
    ]
    tools = database_tools(settings)
    assert len(tools) == 14
    assert all(tool.endpoint and tool.endpoint.url == f"builtin:{tool.name}" for tool in tools)
    sales = {tool.name: tool for tool in tools if tool.name.startswith("sales_")}
    assert "sales database (Orders)" in sales["sales_run_select"].description
    assert set(DatabasePack.open(settings).functions()) == {tool.name for tool in tools}


def test_the_query_tools_descriptions_carry_the_schema(engine_url: str) -> None:
    tools = {
        t.name: t for t in database_tools([DatabasePackSettings(name="music", url=engine_url)])
    }
    for name in ("music_run_select", "music_check_where"):
        description = tools[name].description
        assert "Tables: albums(album_id, title, artist_id -> artists); " in description
        assert "tracks(track_id, name, album_id -> albums, genre_id -> genres" in description
    assert "Tables:" not in tools["music_list_tables"].description


def test_a_database_that_cannot_be_read_gives_plain_descriptions(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite:///{tmp_path / 'missing.db'}"
    tools = database_tools([DatabasePackSettings(name="gone", url=url)])
    assert len(tools) == 7
    assert all("Tables:" not in tool.description for tool in tools)
    assert "gone: no schema in its tools' descriptions" in caplog.text


MUSIC_TABLES = {
    "artists",
    "albums",
    "genres",
    "tracks",
    "customers",
    "invoices",
    "invoice_lines",
}


def test_table_parameters_are_enums_of_the_live_tables(engine_url: str) -> None:
    tools = {
        t.name: t for t in database_tools([DatabasePackSettings(name="music", url=engine_url)])
    }
    distinct = tools["music_get_distinct_values"]
    table = distinct.param_schemas()["table"]
    assert isinstance(table["enum"], list)
    assert set(table["enum"]) == MUSIC_TABLES
    for name in ("list_tables", "is_value_in_column", "get_date_format", "check_where"):
        assert tools[f"music_{name}"].param_schemas()["table"]["enum"] == table["enum"]
    problems = validate_arguments(distinct, {"table": "album", "column": "title"})
    assert len(problems) == 1
    assert problems[0].startswith("table: 'album' is not one of [")
    assert "'albums'" in problems[0]
    assert "'invoice_lines'" in problems[0]
    assert validate_arguments(distinct, {"table": "albums", "column": "title"}) == []


def test_the_table_enums_are_checked_but_not_in_the_retrieval_documents(
    sqlite_url: str, tmp_path: Any
) -> None:
    """The tools that take a table are found for what they do, whatever the database
    holds: with the seven table names in their documents, get_distinct_values outranked
    run_select for "the total of all invoices of the customers in France" (the pack
    suite's traces of 88feb2f). Only the query tools' outline names the tables."""
    live = {t.name: t for t in database_tools([DatabasePackSettings(name="music", url=sqlite_url)])}
    missing = DatabasePackSettings(name="music", url=f"sqlite:///{tmp_path / 'none.db'}")
    free = {t.name: t for t in database_tools([missing])}
    documents = {d.name: d.text for d in catalog_documents(list(live.values()), RetrieverConfig())}
    without = {d.name: d.text for d in catalog_documents(list(free.values()), RetrieverConfig())}
    for name in ("list_tables", "get_distinct_values", "is_value_in_column", "get_date_format"):
        assert "enum" in live[f"music_{name}"].param_schemas()["table"]
        assert documents[f"music_{name}"] == without[f"music_{name}"]
        assert "invoice_lines" not in documents[f"music_{name}"]
    assert "invoice_lines" in documents["music_run_select"]


def test_a_database_out_of_reach_keeps_table_names_free(tmp_path: Any) -> None:
    missing = DatabasePackSettings(name="gone", url=f"sqlite:///{tmp_path / 'none.db'}")
    tools = {t.name: t for t in database_tools([missing])}
    assert "enum" not in tools["gone_get_distinct_values"].param_schemas()["table"]


async def test_list_tables_gives_columns_types_and_keys(pack: DatabasePack) -> None:
    answer = await call(pack, "list_tables")
    tables = {table["name"]: table for table in answer["tables"]}
    assert set(tables) == MUSIC_TABLES
    columns = {c["name"]: c for c in tables["albums"]["columns"]}
    assert columns["album_id"]["primary_key"] is True
    assert columns["title"]["primary_key"] is False
    assert columns["title"]["nullable"] is False
    assert "VARCHAR" in columns["title"]["type"]
    assert tables["albums"]["foreign_keys"] == [
        {"columns": ["artist_id"], "references": "artists(artist_id)"}
    ]
    one = await call(pack, "list_tables", table="genres")
    assert [table["name"] for table in one["tables"]] == ["genres"]


async def test_find_columns_containing_value_exactly(pack: DatabasePack) -> None:
    answer = await call(pack, "find_columns_containing_value", value="Germany")
    found = {(m["table"], m["column"]) for m in answer["matches"]}
    assert found == {("customers", "country"), ("invoices", "billing_country")}
    assert (await call(pack, "find_columns_containing_value", value="germany"))["matches"] == []


async def test_find_columns_containing_value_fuzzily(pack: DatabasePack) -> None:
    answer = await call(pack, "find_columns_containing_value", value="blue", fuzzy=True)
    found = {(m["table"], m["column"]): m["values"] for m in answer["matches"]}
    assert sorted(found[("albums", "title")]) == ["Blue Train", "Kind of Blue"]
    assert found[("tracks", "name")] == ["Blue Train"]
    misspelt = await call(pack, "find_columns_containing_value", value="Jon Coltrane", fuzzy=True)
    assert misspelt["matches"][0] == {
        "table": "artists",
        "column": "name",
        "values": ["John Coltrane"],
    }


async def test_get_distinct_values_counts_and_caps(pack: DatabasePack) -> None:
    answer = await call(pack, "get_distinct_values", table="customers", column="country")
    assert answer["distinct"] == 4
    assert answer["values"][0] == {"value": "Germany", "count": 2}
    assert {v["value"] for v in answer["values"]} == {"Germany", "France", "USA", "Portugal"}
    assert answer["truncated"] is False
    capped = await call(pack, "get_distinct_values", table="customers", column="country", limit=2)
    assert len(capped["values"]) == 2
    assert capped["truncated"] is True


async def test_is_value_in_column_and_near_spellings(pack: DatabasePack) -> None:
    present = await call(
        pack, "is_value_in_column", table="customers", column="country", value="Germany"
    )
    assert (present["present"], present["rows"]) == (True, 2)
    absent = await call(
        pack, "is_value_in_column", table="customers", column="country", value="Germny"
    )
    assert (absent["present"], absent["rows"]) == (False, 0)
    assert absent["similar"] == ["Germany"]
    number = await call(
        pack, "is_value_in_column", table="invoice_lines", column="quantity", value=3
    )
    assert (number["present"], number["rows"]) == (True, 1)


async def test_get_date_format(pack: DatabasePack, engine_url: str) -> None:
    answer = await call(pack, "get_date_format", table="invoices", column="invoice_date", samples=3)
    assert len(answer["samples"]) == 3
    if engine_url.startswith("sqlite"):  # text dates: the format they are written in
        assert answer["formats"] == ["%Y-%m-%d %H:%M:%S"]
        assert all(sample[:4] in ("2021", "2022") for sample in answer["samples"])
    else:  # a TIMESTAMP column: compared as such
        assert answer["formats"] == ["native TIMESTAMP"]
        assert all(sample.startswith(("2021-", "2022-")) for sample in answer["samples"])


async def test_check_where_counts_matching_rows(pack: DatabasePack) -> None:
    answer = await call(
        pack, "check_where", table="invoices", where="WHERE billing_country = 'Germany'"
    )
    assert (answer["valid"], answer["rows"]) == (True, 3)


async def test_check_where_returns_the_databases_own_error(
    pack: DatabasePack, engine_url: str
) -> None:
    answer = await call(pack, "check_where", table="invoices", where="billing_contry = 'Germany'")
    assert answer["valid"] is False
    if engine_url.startswith("sqlite"):
        assert "no such column: billing_contry" in answer["error"]
    else:
        assert 'column "billing_contry" does not exist' in answer["error"]


async def test_run_select_answers_the_jazz_question(pack: DatabasePack) -> None:
    answer = await call(pack, "run_select", sql=JAZZ_BY_GERMAN_CUSTOMER)
    assert answer["columns"] == ["customer", "jazz_tracks"]
    assert answer["rows"] == [["Hannah Schmidt", 4], ["Lukas Weber", 1]]
    assert answer["truncated"] is False


async def test_run_select_revenue_by_country(pack: DatabasePack) -> None:
    sql = (
        "SELECT billing_country, ROUND(SUM(l.unit_price * l.quantity), 2) AS revenue "
        "FROM invoices i JOIN invoice_lines l ON l.invoice_id = i.invoice_id "
        "GROUP BY billing_country ORDER BY revenue DESC, billing_country"
    )
    answer = await call(pack, "run_select", sql=sql)
    assert answer["rows"] == [
        ["Germany", 6.84],
        ["Portugal", 2.97],
        ["USA", 2.97],
        ["France", 1.29],
    ]


async def test_run_select_caps_the_rows(pack: DatabasePack) -> None:
    answer = await call(
        pack, "run_select", sql="SELECT * FROM invoice_lines ORDER BY line_id", max_rows=4
    )
    assert answer["row_count"] == 4
    assert [row[0] for row in answer["rows"]] == [1, 2, 3, 4]
    assert answer["truncated"] is True


async def test_a_setting_caps_what_the_model_asks_for(engine_url: str) -> None:
    from tests.tools.database.conftest import open_pack

    pack = open_pack(engine_url, max_rows=2)
    try:
        answer = await call(
            pack, "run_select", sql="SELECT line_id FROM invoice_lines", max_rows=50
        )
    finally:
        pack.close()
    assert answer["row_count"] == 2
    assert answer["truncated"] is True


@pytest.mark.parametrize(
    ("tool", "arguments", "says"),
    [
        (
            "get_distinct_values",
            {"table": "album", "column": "title"},
            "no table 'album'; the tables: ",
        ),
        (
            "get_distinct_values",
            {"table": "albums", "column": "name"},
            "no column 'name' in table albums; its columns: album_id, title, artist_id",
        ),
        ("run_select", {"sql": "SELECT nme FROM artists"}, "nme"),
    ],
)
async def test_wrong_names_are_refused_with_what_is_there(
    pack: DatabasePack, tool: str, arguments: dict[str, Any], says: str
) -> None:
    with pytest.raises(ToolInputRejected) as raised:
        await call(pack, tool, **arguments)
    assert says in raised.value.message


@pytest.mark.parametrize(
    "sql", ["SELECT genre FROM tracks", "SELECT count(*) FROM sales WHERE total > 1"]
)
async def test_an_unknown_name_in_sql_comes_back_with_the_schema(
    pack: DatabasePack, sql: str
) -> None:
    with pytest.raises(ToolInputRejected) as raised:
        await call(pack, "run_select", sql=sql)
    message = raised.value.message
    assert "The tables and their columns: " in message
    assert "albums(album_id, title, artist_id -> artists)" in message
    assert "tracks(track_id, name, album_id -> albums, genre_id -> genres" in message
    assert "invoices(" in message
    assert "billing_country" in message


async def test_a_syntax_error_comes_back_without_the_schema(pack: DatabasePack) -> None:
    with pytest.raises(ToolInputRejected) as raised:
        await call(pack, "run_select", sql="SELECT title FROM albums WHERE")
    assert "The tables" not in raised.value.message


async def test_check_where_shows_the_schema_with_an_unknown_column(pack: DatabasePack) -> None:
    answer = await call(pack, "check_where", table="invoices", where="contry = 'Germany'")
    assert answer["valid"] is False
    assert "invoices(invoice_id" in answer["error"]


async def test_a_table_created_after_the_first_call_is_found(tmp_path: Any) -> None:
    import sqlite3

    from tests.tools.database.conftest import open_pack
    from tests.tools.database.music import build_sqlite

    url = build_sqlite(tmp_path / "music.db")
    pack = open_pack(url)
    try:
        await call(pack, "list_tables")
        with sqlite3.connect(tmp_path / "music.db") as writer:
            writer.execute("CREATE TABLE playlists (playlist_id INTEGER PRIMARY KEY, name TEXT)")
            writer.execute("INSERT INTO playlists VALUES (1, 'Evening')")
        answer = await call(pack, "get_distinct_values", table="playlists", column="name")
    finally:
        pack.close()
    assert answer["values"] == [{"value": "Evening", "count": 1}]
