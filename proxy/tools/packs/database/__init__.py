"""The database pack: read-only navigation and functional tools over a SQL database.

The tools of "Middleware for LLMs" (../shared/METHOD.md §3) over any database a
setting names (``packs.database``): navigation (tables and columns, which columns hold
a value, a column's distinct values, whether a value is in a column, how a date
column is written) and functional (is a WHERE clause valid and how many rows match;
run one SELECT under a row cap and a timeout). Nothing writes: ``guard`` refuses
anything but one SELECT before it reaches the database, and ``engine`` connects
read-only besides (SQLite ``mode=ro`` with an authorizer, PostgreSQL read-only
transactions). ``catalog`` turns each database into catalog ``Tool`` records and
in-process tools, the way :mod:`proxy.tools.packs.math.catalog` does for the math pack.

SQLAlchemy and sqlglot (the ``packs`` extra) are imported only when a database is
configured, through the two functions below: a deployment without the extra and without
``packs.database`` never imports them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from proxy.config import DatabasePackSettings

if TYPE_CHECKING:
    from graph_store.models import Tool
    from proxy.tools.packs.database.catalog import DatabasePack


def configured_tools(settings: Sequence[DatabasePackSettings]) -> list[Tool]:
    """Every configured database's tools as catalog records; none configured, no import."""
    if not settings:
        return []
    from proxy.tools.packs.database.catalog import database_tools

    return database_tools(settings)


def open_pack(settings: Sequence[DatabasePackSettings]) -> DatabasePack | None:
    """The configured databases, opened read-only; None when there are none."""
    if not settings:
        return None
    from proxy.tools.packs.database.catalog import DatabasePack

    return DatabasePack.open(settings)
