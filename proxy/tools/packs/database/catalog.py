"""The database pack as catalog tools: one set of seven per configured database.

Each database named ``name`` in ``packs.database`` gives tools ``<name>_list_tables``,
``<name>_find_columns_containing_value``… with ``builtin:<tool>`` endpoints, in the
group ``database_<name>`` and the category ``database``; :class:`DatabasePack`
holds the open databases and their in-process functions for the executor's
:class:`~proxy.tools.builtin.PythonTools`.

Every ``table`` parameter is an ``enum`` of the tables and views the database holds
when the catalog loads (:func:`live_schema`), so a wrong name is refused by the
schema check, with the names that exist, before the tool runs; a database that
cannot be reached then, or holds more than :data:`MAX_TABLE_ENUM` tables, gets plain
strings, and the tool's own check (against the schema it reflects) still refuses a
wrong name. A table made after the load is in the enum from the next load on. The enum
is marked ``x-data-enum``: retrieval's documents leave it out (only the query tools'
outline names the tables), see :mod:`retriever.documents`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import sqlalchemy as sa
from pydantic import JsonValue

from graph_store.models import Tool
from proxy.config import DatabasePackSettings
from proxy.errors import ToolgraphError
from proxy.tools.builtin import ChoicePaths, PythonTool
from proxy.tools.packs.configured import ToolSpec, pack_choices, pack_functions, pack_tools
from proxy.tools.packs.database import functional, navigation
from proxy.tools.packs.database.engine import ReadOnlyDatabase
from proxy.tools.packs.database.schema import Schema
from retriever.documents import DATA_ENUM

log = logging.getLogger(__name__)

#: Tables beyond which a ``table`` parameter stays a plain string (the enum is in every
#: prompt that shows the tool).
MAX_TABLE_ENUM = 200

_TABLE: JsonValue = {"type": "string", "description": "A table's name, as list_tables gives it."}
_COLUMN: JsonValue = {"type": "string", "description": "A column of that table."}
#: A table or column as list_tables or find_columns_containing_value named it.
_NAMES: ChoicePaths = {
    "table": ("tables[].name", "matches[].table"),
    "column": ("tables[].columns[].name", "matches[].column"),
}
_VALUE: JsonValue = {"type": ["string", "number"], "description": "The value to look for."}


#: The tools whose descriptions carry the schema's outline: the ones that take SQL. With
#: the table and column names in the text, retrieval finds them for a sub-task about
#: "tracks" or "invoices", and the argument writer's first SELECT names real columns.
_OUTLINED = frozenset({"run_select", "check_where"})
OUTLINE_CHARS = 1000

SPECS: tuple[ToolSpec[ReadOnlyDatabase], ...] = (
    ToolSpec(
        "list_tables",
        navigation.list_tables,
        "List the tables of the {what} with their columns, column types, primary keys and "
        "foreign keys (the schema); optionally one table only.",
        {"table": {"type": "string", "description": "Only this table."}},
        example={"tables": [{"name": "customers", "columns": [{"name": "country"}]}]},
    ),
    ToolSpec(
        "find_columns_containing_value",
        navigation.find_columns_containing_value,
        "Find which tables and columns of the {what} contain a value (a name, a place, a "
        "code): exact, or fuzzy (any case, part of a longer text, or a near spelling).",
        {"value": _VALUE, "fuzzy": {"type": "boolean", "description": "Match loosely."}},
        ("value",),
        example={"matches": [{"table": "customers", "column": "country", "values": ["Germany"]}]},
    ),
    ToolSpec(
        "get_distinct_values",
        navigation.get_distinct_values,
        "Get the distinct values of a column of the {what} with how many rows hold each, "
        "most frequent first.",
        {
            "table": _TABLE,
            "column": _COLUMN,
            "limit": {"type": "integer", "minimum": 1, "maximum": navigation.MAX_DISTINCT},
        },
        ("table", "column"),
        example={"distinct": 24, "values": [{"value": "USA", "count": 13}], "truncated": True},
        choices=_NAMES,
    ),
    ToolSpec(
        "is_value_in_column",
        navigation.is_value_in_column,
        "Check whether a value occurs in a column of the {what} (how many rows), with the "
        "closest spellings when it does not.",
        {"table": _TABLE, "column": _COLUMN, "value": _VALUE},
        ("table", "column", "value"),
        example={"present": False, "rows": 0, "similar": ["Germany"]},
        choices=_NAMES,
    ),
    ToolSpec(
        "get_date_format",
        navigation.get_date_format,
        "Show sample values of a date or time column of the {what} and the format they are "
        "written in, to compare dates correctly in SQL.",
        {
            "table": _TABLE,
            "column": _COLUMN,
            "samples": {"type": "integer", "minimum": 1, "maximum": 50},
        },
        ("table", "column"),
        example={"samples": ["2009-01-01 00:00:00"], "formats": ["%Y-%m-%d %H:%M:%S"]},
        choices=_NAMES,
    ),
    ToolSpec(
        "check_where",
        functional.check_where,
        "Check a SQL WHERE condition on a table of the {what}: whether it is valid and how "
        "many rows it matches (the database's error when it is not).",
        {
            "table": _TABLE,
            "where": {"type": "string", "description": "The condition, without WHERE."},
        },
        ("table", "where"),
        example={"valid": True, "rows": 13},
        choices={"table": _NAMES["table"]},
    ),
    ToolSpec(
        "run_select",
        functional.run_select,
        "Run one read-only SQL SELECT query on the {what} and return its rows (capped): "
        "answers questions that count, sum, rank or join the data.",
        {
            "sql": {"type": "string", "description": "One SELECT statement."},
            "max_rows": {"type": "integer", "minimum": 1},
        },
        ("sql",),
        example={"columns": ["name", "total"], "rows": [["Jazz", 130]], "truncated": False},
    ),
)


def database_tools(settings: Sequence[DatabasePackSettings]) -> list[Tool]:
    """Every configured database's tools as catalog records."""
    return [tool for database in settings for tool in _tools_of(database)]


def _tools_of(database: DatabasePackSettings) -> list[Tool]:
    schema = live_schema(database)
    outline = schema.outline(OUTLINE_CHARS) if schema is not None else ""
    appended = {suffix: f" Tables: {outline}" for suffix in _OUTLINED} if outline else {}
    specs = _with_tables(SPECS, _enum_of(database, schema))
    return pack_tools("database", database.name, database.description, specs, appended)


def live_schema(database: DatabasePackSettings) -> Schema | None:
    """The database's schema now, read once when the catalog loads, for the query tools'
    descriptions and the ``table`` enums; None, with a warning, when it cannot be read."""
    db = ReadOnlyDatabase(database)
    try:
        return db.reflect()
    except (ToolgraphError, sa.exc.SQLAlchemyError) as exc:
        message = exc.message if isinstance(exc, ToolgraphError) else str(exc).splitlines()[0]
        log.warning(
            "database %s: no schema in its tools' descriptions and no table enums: %s",
            db.name,
            message,
        )
        return None
    finally:
        db.dispose()


def _enum_of(database: DatabasePackSettings, schema: Schema | None) -> list[str] | None:
    """The table names a ``table`` parameter may take; None: free text."""
    if schema is None:
        return None
    if len(schema.tables) > MAX_TABLE_ENUM:
        count = len(schema.tables)
        log.info("database %s: %d tables, table names left free text", database.name, count)
        return None
    return [table.name for table in schema.tables]


def _with_tables(
    specs: Sequence[ToolSpec[ReadOnlyDatabase]], tables: Sequence[str] | None
) -> list[ToolSpec[ReadOnlyDatabase]]:
    """``specs`` with each ``table`` parameter limited to ``tables`` (None: as they are)."""
    if tables is None:
        return list(specs)
    return [
        replace(spec, properties={**spec.properties, "table": _limited(table, tables)})
        if isinstance(table := spec.properties.get("table"), dict)
        else spec
        for spec in specs
    ]


def _limited(table: dict[str, JsonValue], tables: Sequence[str]) -> dict[str, JsonValue]:
    """A ``table`` parameter that takes one of ``tables``; marked as the data's names, so
    retrieval finds the tool by what it does, not by the tables the database holds."""
    return {**table, "enum": list(tables), DATA_ENUM: True}


@dataclass
class DatabasePack:
    """The configured databases, opened read-only (connections are made by the first call)."""

    databases: list[ReadOnlyDatabase] = field(default_factory=list)

    @classmethod
    def open(cls, settings: Sequence[DatabasePackSettings]) -> DatabasePack:
        return cls([ReadOnlyDatabase(database) for database in settings])

    def functions(self) -> dict[str, PythonTool]:
        """Each database's tools by catalog name, for the executor."""
        return pack_functions(self.databases, SPECS)

    def choices(self) -> dict[str, ChoicePaths]:
        """Each database's tools by catalog name: where their tables and columns are listed."""
        return pack_choices(self.databases, SPECS)

    def close(self) -> None:
        for db in self.databases:
            db.dispose()
