"""The SQL check every model-written statement passes before it reaches a database.

One statement, a query (SELECT, UNION, VALUES…), with no write, DDL, lock, ``INTO``,
``ATTACH``, ``PRAGMA``, ``COPY`` or ``SET`` anywhere inside it (a data-modifying CTE
hides a DELETE inside a SELECT), and no function that reaches outside the query
(``pg_read_file``, ``lo_import``, ``set_config``, ``nextval``, ``dblink``,
``load_extension``…). Parsed with sqlglot in the database's dialect, never matched as
text. It is the first of two walls: the connection is read-only too
(:mod:`proxy.tools.packs.database.engine`), so a statement this check misreads still
cannot write.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from proxy.errors import ToolInputRejected

#: Nodes no read needs. ``Command`` is sqlglot's "a statement I do not model" (VACUUM…).
_FORBIDDEN: tuple[type[exp.Expr], ...] = (
    exp.Insert,
    exp.Update,
    exp.Delete,
    exp.Merge,
    exp.Create,
    exp.Drop,
    exp.Alter,
    exp.TruncateTable,
    exp.Command,
    exp.Into,
    exp.Lock,
    exp.Pragma,
    exp.Attach,
    exp.Detach,
    exp.Copy,
    exp.Set,
    exp.Transaction,
    exp.Commit,
    exp.Rollback,
    exp.Grant,
    exp.Use,
)

#: Functions with effects outside the query, or that read the server's files or run SQL text.
_FORBIDDEN_FUNCTIONS = frozenset(
    {
        "set_config",
        "nextval",
        "setval",
        "currval",
        "lastval",
        "query_to_xml",
        "query_to_xml_and_xmlschema",
        "query_to_xmlschema",
        "cursor_to_xml",
        "load_extension",
        "fts3_tokenizer",
        "readfile",
        "writefile",
        "edit",
        "txid_current",
    }
)
_FORBIDDEN_PREFIXES = ("pg_", "lo_", "dblink")

DIALECTS = {"sqlite": "sqlite", "postgresql": "postgres"}


class StatementRefused(ToolInputRejected):
    """Model-written SQL the pack will not send: not one read-only query."""


def check_select(sql: str, dialect: str) -> None:
    """Raise :class:`StatementRefused` unless ``sql`` is one read-only query in ``dialect``
    (SQLAlchemy's dialect name: ``sqlite``, ``postgresql``).

    Blocking (a long statement takes seconds to parse): call it off the event loop.
    """
    try:
        _check(sql, DIALECTS.get(dialect, dialect))
    except RecursionError:  # sqlglot parses and walks by recursion
        raise StatementRefused("the SQL is nested too deeply to check") from None


def check_length(sql: str, max_chars: int) -> None:
    """Refuse ``sql`` longer than ``max_chars`` before anything parses it."""
    if len(sql) > max_chars:
        raise StatementRefused(
            f"the SQL is {len(sql)} characters long; at most max_sql_chars ({max_chars}) "
            "may be sent"
        )


def _check(sql: str, dialect: str) -> None:
    statement = _one_statement(sql, dialect)
    if not isinstance(statement, exp.Query):
        raise StatementRefused(f"only a SELECT may run here, not {_kind(statement)}")
    for node in statement.walk():
        if isinstance(node, _FORBIDDEN):
            raise StatementRefused(f"a read-only query may not hold {_kind(node)}")
        if isinstance(node, exp.Func) and _forbidden_function(function_name(node)):
            raise StatementRefused(f"the function {function_name(node)} is not allowed here")


def _one_statement(sql: str, dialect: str) -> exp.Expr:
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except SqlglotError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise StatementRefused(f"the SQL does not parse: {first}") from None
    if len(statements) != 1:
        raise StatementRefused(f"exactly one statement may run, got {len(statements)}")
    return statements[0]


def function_name(node: exp.Func) -> str:
    name = node.name if isinstance(node, exp.Anonymous) else node.sql_name()
    return name.lower()


def _forbidden_function(name: str) -> bool:
    return name in _FORBIDDEN_FUNCTIONS or name.startswith(_FORBIDDEN_PREFIXES)


def _kind(node: exp.Expr) -> str:
    return node.key.upper().replace("_", " ")
