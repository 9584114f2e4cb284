"""The functional tools: model-written SQL, checked (:mod:`~proxy.tools.packs.database.guard`),
then run on a read-only connection under a row cap and a statement timeout."""

from __future__ import annotations

import re
from collections.abc import Mapping

from pydantic import JsonValue
from sqlalchemy.engine import Connection

from proxy.errors import ToolInputRejected
from proxy.tools.packs.database._values import fetch_rows, int_argument, text_argument
from proxy.tools.packs.database.engine import ReadOnlyDatabase
from proxy.tools.packs.database.guard import check_length, check_select
from proxy.tools.packs.database.navigation import find_table
from proxy.tools.packs.database.schema import Schema
from proxy.tools.packs.pool import in_pack_thread

_WHERE = re.compile(r"^where\s+", re.IGNORECASE)
_ROW_BUFFER = 16  # rows PostgreSQL's cursor hands over at most at once


async def check_where(db: ReadOnlyDatabase, arguments: Mapping[str, JsonValue]) -> JsonValue:
    """Whether a WHERE clause is valid on a table and how many rows it matches; an invalid
    one comes back with the database's own message, for the model to fix."""
    table_name = text_argument(arguments, "table")
    where = _WHERE.sub("", text_argument(arguments, "where").strip())
    check_length(where, db.settings.max_sql_chars)

    def work(connection: Connection, schema: Schema) -> JsonValue:
        table = find_table(db, connection, schema, table_name)
        quoted = connection.dialect.identifier_preparer.quote(table.name)
        sql = f"SELECT count(*) FROM {quoted} WHERE {where}"
        check_select(sql, db.dialect)  # in the pack's thread, like the statement
        rows = connection.exec_driver_sql(sql).scalar_one()
        return {"table": table.name, "where": where, "valid": True, "rows": int(rows)}

    try:
        return await db.run(work)
    except ToolInputRejected as exc:
        if exc.param not in (db.name, "table"):
            raise  # refused before the database: not a matter of validity
        return {"table": table_name, "where": where, "valid": False, "error": exc.message}


async def run_select(db: ReadOnlyDatabase, arguments: Mapping[str, JsonValue]) -> JsonValue:
    """One SELECT; at most ``max_rows`` rows (the setting caps it), and whether there were more."""
    sql = text_argument(arguments, "sql").strip()
    limit = int_argument(arguments, "max_rows", db.settings.max_rows, db.settings.max_rows)
    check_length(sql, db.settings.max_sql_chars)
    await in_pack_thread(check_select, sql, db.dialect)  # parsing takes time: off the loop

    def work(connection: Connection, schema: Schema) -> JsonValue:
        # A server-side cursor on PostgreSQL: a million-row answer is not sent to be
        # dropped, and rows come a few at a time, so the byte budget stops the fetching.
        options = {"stream_results": True, "max_row_buffer": _ROW_BUFFER}
        result = connection.execution_options(**options).exec_driver_sql(sql)
        columns: list[JsonValue] = list(result.keys())
        settings = db.settings
        try:
            fetched = fetch_rows(
                result, limit, settings.max_cell_bytes, settings.max_answer_bytes, db.name
            )
        finally:
            result.close()
        answer: dict[str, JsonValue] = {
            "columns": columns,
            "rows": fetched.rows,
            "row_count": len(fetched.rows),
            "truncated": fetched.truncated,
        }
        if fetched.budget_spent:
            answer["note"] = (
                f"rows stopped at max_answer_bytes ({settings.max_answer_bytes} bytes); "
                "select fewer or narrower columns for the rest"
            )
        return answer

    return await db.run(work)
