"""A database's tables and columns as the tools see them, reflected once by SQLAlchemy.

Names the model writes (a table, a column) are looked up here before any SQL is
built: a name that is not in the schema is refused with the names that are, which
is the error the argument writer reads back (the paper's error feedback), and a
name that is found is quoted by SQLAlchemy, never pasted into SQL text.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from pydantic import JsonValue
from sqlalchemy.engine import Connection

from proxy.errors import ToolInputRejected

_LISTED = 40  # names shown in a "no such table/column" error
#: The schema shown with an error that names an unknown table or column: enough for a
#: music store's or a shop's dozen tables, a fraction of a prompt for a large database.
_OUTLINE_CHARS = 1500


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: str
    nullable: bool
    primary_key: bool
    textual: bool  # held as text: searched by value, LIKE-able
    numeric: bool

    def describe(self) -> dict[str, JsonValue]:
        return {
            "name": self.name,
            "type": self.type,
            "nullable": self.nullable,
            "primary_key": self.primary_key,
        }


@dataclass(frozen=True, slots=True)
class ForeignKey:
    columns: tuple[str, ...]
    table: str
    references: tuple[str, ...]

    def describe(self) -> dict[str, JsonValue]:
        return {
            "columns": list(self.columns),
            "references": f"{self.table}({', '.join(self.references)})",
        }


@dataclass(frozen=True, slots=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    foreign_keys: tuple[ForeignKey, ...]
    view: bool = False

    def column(self, name: str) -> Column:
        for column in self.columns:
            if column.name == name:
                return column
        for column in self.columns:  # the model's case is not the schema's
            if column.name.lower() == name.lower():
                return column
        names = ", ".join(c.name for c in self.columns[:_LISTED])
        raise ToolInputRejected(
            f"no column {name!r} in table {self.name}; its columns: {names}", param="column"
        )

    def outline(self) -> str:
        targets = {key.columns[0]: key.table for key in self.foreign_keys if len(key.columns) == 1}
        columns = (
            f"{column.name} -> {targets[column.name]}" if column.name in targets else column.name
            for column in self.columns
        )
        return f"{self.name}({', '.join(columns)})"

    def selectable(self) -> sa.TableClause:
        return sa.table(self.name, *(sa.column(c.name) for c in self.columns))

    def describe(self) -> dict[str, JsonValue]:
        described: dict[str, JsonValue] = {
            "name": self.name,
            "columns": [column.describe() for column in self.columns],
        }
        if self.foreign_keys:
            described["foreign_keys"] = [key.describe() for key in self.foreign_keys]
        if self.view:
            described["view"] = True
        return described


@dataclass(frozen=True, slots=True)
class Schema:
    tables: tuple[Table, ...]

    def table(self, name: str) -> Table:
        for table in self.tables:
            if table.name == name:
                return table
        for table in self.tables:
            if table.name.lower() == name.lower():
                return table
        names = ", ".join(t.name for t in self.tables[:_LISTED])
        raise ToolInputRejected(f"no table {name!r}; the tables: {names}", param="table")

    def has(self, name: str) -> bool:
        return any(table.name.lower() == name.lower() for table in self.tables)

    def outline(self, limit: int = _OUTLINE_CHARS) -> str:
        """The tables with their columns on one line, ``invoices(invoice_id, customer_id ->
        customers, total); …``, cut at ``limit`` characters (``…`` says where)."""
        text = "; ".join(t.outline() for t in sorted(self.tables, key=lambda t: t.name))
        return text if len(text) <= limit else text[: limit - 1].rstrip(" ,;(") + "…"


def reflect_schema(connection: Connection) -> Schema:
    """Every table and view of the connection's default schema."""
    inspector = sa.inspect(connection)
    tables = [_table(inspector, name, view=False) for name in inspector.get_table_names()]
    tables += [_table(inspector, name, view=True) for name in inspector.get_view_names()]
    return Schema(tuple(tables))


def _table(inspector: sa.Inspector, name: str, *, view: bool) -> Table:
    keys = set(inspector.get_pk_constraint(name).get("constrained_columns") or [])
    columns = tuple(_column(info, keys) for info in inspector.get_columns(name))
    foreign = () if view else tuple(_foreign_key(key) for key in inspector.get_foreign_keys(name))
    return Table(name, columns, foreign, view)


def _column(info: sa.engine.interfaces.ReflectedColumn, keys: set[str]) -> Column:
    kind = info["type"]
    return Column(
        name=info["name"],
        type=str(kind),
        nullable=bool(info.get("nullable", True)),
        primary_key=info["name"] in keys,
        textual=isinstance(kind, sa.String | sa.Enum),
        numeric=isinstance(kind, sa.Numeric | sa.Integer),
    )


def _foreign_key(key: sa.engine.interfaces.ReflectedForeignKeyConstraint) -> ForeignKey:
    return ForeignKey(
        tuple(key["constrained_columns"]),
        key["referred_table"],
        tuple(key["referred_columns"]),
    )
