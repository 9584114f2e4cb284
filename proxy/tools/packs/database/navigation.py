"""The navigation tools: what is in the database, without writing SQL.

Each builds its statements with SQLAlchemy from names checked against the reflected
schema (:mod:`proxy.tools.packs.database.schema`), so no model-written text reaches the
database here, and each runs in one read-only call of
:class:`~proxy.tools.packs.database.engine.ReadOnlyDatabase`.
"""

from __future__ import annotations

import datetime
import difflib
from collections.abc import Mapping

import sqlalchemy as sa
from pydantic import JsonValue
from sqlalchemy.engine import Connection

from proxy.tools.packs.database._values import (
    int_argument,
    json_value,
    scalar_argument,
    text_argument,
)
from proxy.tools.packs.database.engine import ReadOnlyDatabase
from proxy.tools.packs.database.schema import Column, Schema, Table

MAX_DISTINCT = 200  # values get_distinct_values returns at most
_MATCHES = 20  # columns find_columns_containing_value lists at most
_PER_COLUMN = 5  # matching values shown per column
_SAMPLE_ROWS = 100_000  # rows whose values are compared by spelling
_POOL = 5000  # distinct values per column kept from them
_FUZZY_CUTOFF = 0.75
_SIMILAR = 5

_DATE_FORMATS = (
    "%Y-%m-%d",
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%dT%H:%M:%S",
    "%Y-%m-%d %H:%M:%S.%f",
    "%Y-%m-%dT%H:%M:%S.%f",
    "%Y/%m/%d",
    "%d/%m/%Y",
    "%m/%d/%Y",
    "%d.%m.%Y",
    "%Y%m%d",
    "%d %b %Y",
    "%b %d, %Y",
    "%Y-%m",
    "%Y",
)


async def list_tables(db: ReadOnlyDatabase, arguments: Mapping[str, JsonValue]) -> JsonValue:
    """Tables (and views) with their columns, types, keys and foreign keys."""
    wanted = arguments.get("table")

    def work(connection: Connection, schema: Schema) -> JsonValue:
        tables = [find_table(db, connection, schema, wanted)] if wanted else schema.tables
        return {
            "database": db.name,
            "dialect": db.dialect,
            "tables": [table.describe() for table in tables],
        }

    return await db.run(work)


async def find_columns_containing_value(
    db: ReadOnlyDatabase, arguments: Mapping[str, JsonValue]
) -> JsonValue:
    """Which columns hold ``value``: exactly, or (``fuzzy``) any case, inside longer text,
    or spelt nearly the same; the closest first."""
    value = str(scalar_argument(arguments, "value"))
    fuzzy = arguments.get("fuzzy") is True

    def work(connection: Connection, schema: Schema) -> JsonValue:
        found: list[tuple[float, dict[str, JsonValue]]] = []
        for table in schema.tables:
            for column, values in _table_matches(connection, table, value, fuzzy).items():
                best = max(_similarity(value, v) for v in values)
                match: dict[str, JsonValue] = {
                    "table": table.name,
                    "column": column.name,
                    "values": list(values),
                }
                found.append((best, match))
        found.sort(key=lambda pair: -pair[0])
        matches: list[JsonValue] = [match for _, match in found[:_MATCHES]]
        return {"value": value, "fuzzy": fuzzy, "matches": matches}

    return await db.run(work)


async def get_distinct_values(
    db: ReadOnlyDatabase, arguments: Mapping[str, JsonValue]
) -> JsonValue:
    """A column's distinct values with how many rows hold each, the most frequent first."""
    table_name, column_name = _names(arguments)
    limit = int_argument(arguments, "limit", 20, MAX_DISTINCT)

    def work(connection: Connection, schema: Schema) -> JsonValue:
        table = find_table(db, connection, schema, table_name)
        column: sa.ColumnClause[object] = sa.column(table.column(column_name).name)
        count = sa.func.count()
        # the number of groups rides along on every row: one scan, not a second count
        query = (
            sa.select(column, count, sa.func.count().over())
            .select_from(table.selectable())
            .group_by(column)
            .order_by(count.desc(), column)
            .limit(limit + 1)
        )
        rows = connection.execute(query).all()
        distinct = rows[0][2] if rows else 0
        values: list[JsonValue] = [
            {"value": json_value(row[0]), "count": int(row[1])} for row in rows[:limit]
        ]
        return {
            "table": table.name,
            "column": column.name,
            "distinct": int(distinct),
            "values": values,
            "truncated": len(rows) > limit,
        }

    return await db.run(work)


async def is_value_in_column(db: ReadOnlyDatabase, arguments: Mapping[str, JsonValue]) -> JsonValue:
    """Whether ``value`` is in the column, in how many rows, and when it is not, the
    column's values spelt most like it."""
    table_name, column_name = _names(arguments)
    value = scalar_argument(arguments, "value")

    def work(connection: Connection, schema: Schema) -> JsonValue:
        table = find_table(db, connection, schema, table_name)
        column = table.column(column_name)
        condition = _equals(column, value)
        rows = connection.execute(
            sa.select(sa.func.count()).select_from(table.selectable()).where(condition)
        ).scalar_one()
        answer: dict[str, JsonValue] = {
            "table": table.name,
            "column": column.name,
            "value": value,
            "present": rows > 0,
            "rows": int(rows),
        }
        if not rows:
            pool = _sampled_values(connection, table, [column])[column]
            close = difflib.get_close_matches(str(value), sorted(pool), _SIMILAR, 0.6)
            answer["similar"] = list(close)
        return answer

    return await db.run(work)


async def get_date_format(db: ReadOnlyDatabase, arguments: Mapping[str, JsonValue]) -> JsonValue:
    """Sample values of a date column and the formats (strftime) they are all written in."""
    table_name, column_name = _names(arguments)
    samples = int_argument(arguments, "samples", 5, 50)

    def work(connection: Connection, schema: Schema) -> JsonValue:
        table = find_table(db, connection, schema, table_name)
        column = table.column(column_name)
        selected: sa.ColumnClause[object] = sa.column(column.name)
        query = (
            sa.select(selected)
            .select_from(table.selectable())
            .where(selected.is_not(None))
            .distinct()
            .limit(samples)
        )
        values = [row[0] for row in connection.execute(query)]
        native = all(isinstance(v, datetime.date | datetime.time) for v in values) and values
        return {
            "table": table.name,
            "column": column.name,
            "type": column.type,
            "samples": [json_value(v) for v in values],
            "formats": ["native " + column.type] if native else date_formats(values),
        }

    return await db.run(work)


def date_formats(values: list[object]) -> list[JsonValue]:
    """The formats of :data:`_DATE_FORMATS` that read every value."""
    texts = [str(v) for v in values]
    return [fmt for fmt in _DATE_FORMATS if texts and all(_parses(t, fmt) for t in texts)]


def _parses(text: str, fmt: str) -> bool:
    try:
        datetime.datetime.strptime(text, fmt)
    except ValueError:
        return False
    return True


def _names(arguments: Mapping[str, JsonValue]) -> tuple[str, str]:
    return text_argument(arguments, "table"), text_argument(arguments, "column")


def find_table(
    db: ReadOnlyDatabase, connection: Connection, schema: Schema, name: JsonValue
) -> Table:
    """The table named ``name``; a name not in the schema reflects it again first (a table
    created since), and then refuses with the names there are."""
    text = str(name)
    if not schema.has(text):
        schema = db.schema(connection, fresh=True)
    return schema.table(text)


def _table_matches(
    connection: Connection, table: Table, value: str, fuzzy: bool
) -> dict[Column, list[str]]:
    """The columns of ``table`` that hold ``value``, each with the values that matched.

    One scan of the table answers for all its columns (a column at a time took 7 s on
    a million rows; ``eval/bench_database.py``); the values of the few columns that
    match are fetched after, and near spellings come from a sample of the rows."""
    # A value without a digit is in no number or date column: those are not scanned.
    columns = [c for c in table.columns if c.textual or any(ch.isdigit() for ch in value)]
    if not columns:
        return {}
    texts = [_as_text(column) for column in columns]
    tests = [_contains(text, value, connection.dialect.name) if fuzzy else text == value
             for text in texts]  # fmt: skip
    probe = sa.select(
        *(sa.func.max(sa.case((test, text))) for test, text in zip(tests, texts, strict=True))
    ).select_from(table.selectable())
    first = connection.execute(probe).one()
    hits = {
        column: [str(found)]
        for column, found in zip(columns, first, strict=True)
        if found is not None
    }
    if not fuzzy:
        return hits
    for column in hits:
        index = columns.index(column)
        query = sa.select(texts[index]).select_from(table.selectable()).where(tests[index])
        query = query.distinct().limit(_PER_COLUMN * 4)
        hits[column] = [str(row[0]) for row in connection.execute(query)]
    textual = [column for column in table.columns if column.textual]
    for column, pool in _sampled_values(connection, table, textual).items():
        close = difflib.get_close_matches(value, sorted(pool), _PER_COLUMN, _FUZZY_CUTOFF)
        if close:
            hits[column] = [*hits.get(column, []), *close]
    return {
        column: sorted(set(values), key=lambda v: -_similarity(value, v))[:_PER_COLUMN]
        for column, values in hits.items()
    }


def _contains(text: sa.ColumnElement[str], value: str, dialect: str) -> sa.ColumnElement[bool]:
    """``value`` inside ``text``, in any case. SQLite's LIKE ignores ASCII case by itself;
    a ``lower()`` per cell doubled the cost of a scan there."""
    escaped = value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    pattern = f"%{escaped}%"
    if dialect == "sqlite":
        return text.like(pattern, escape="\\")
    return text.ilike(pattern, escape="\\")


def _sampled_values(
    connection: Connection, table: Table, columns: list[Column]
) -> dict[Column, set[str]]:
    """The distinct values of ``columns`` in the first :data:`_SAMPLE_ROWS` rows: the pool
    near spellings are looked for in (all rows would be a full scan per question)."""
    if not columns:
        return {}
    selected: list[sa.ColumnClause[object]] = [sa.column(column.name) for column in columns]
    query = sa.select(*selected).select_from(table.selectable()).limit(_SAMPLE_ROWS)
    pools: dict[Column, set[str]] = {column: set() for column in columns}
    for row in connection.execute(query):
        for column, cell in zip(columns, row, strict=True):
            if cell is not None and len(pools[column]) < _POOL:
                pools[column].add(str(cell))
    return pools


def _as_text(column: Column) -> sa.ColumnElement[str]:
    selected: sa.ColumnClause[str] = sa.column(column.name)
    return selected if column.textual else sa.cast(selected, sa.Text)


def _equals(column: Column, value: str | int | float) -> sa.ColumnElement[bool]:
    selected: sa.ColumnClause[object] = sa.column(column.name)
    if column.numeric and isinstance(value, int | float):
        return selected == value
    if column.textual:
        return selected == str(value)
    return sa.cast(selected, sa.Text) == str(value)


def _similarity(wanted: str, found: str) -> float:
    return difflib.SequenceMatcher(None, wanted.lower(), found.lower()).ratio()
