"""A database opened read-only, and every call to it: one thread hop, one transaction.

The second wall behind :mod:`proxy.tools.packs.database.guard`: a statement that passed the
check still meets a connection that cannot write.

* SQLite: the file opens with ``mode=ro`` (a URI), ``PRAGMA query_only`` is on, and an
  authorizer allows only reads, the schema pragmas SQLAlchemy's reflection asks, and
  functions other than ``load_extension``; a progress handler ends a statement that
  runs past its time (SQLite has no statement timeout of its own).
* PostgreSQL (psycopg 3): every session starts with ``default_transaction_read_only``
  and a ``statement_timeout``, and every call's transaction says ``READ ONLY`` again
  (a session setting the model cannot turn off with ``set_config``: that function
  is refused, and the transaction's own mode is set after it). A role that may only
  read is still the right thing to configure; the README says so.

Every call runs in a thread of the packs' own pool (the drivers block, see
:mod:`proxy.tools.packs.pool`) inside one transaction that is rolled back. SQLite's
length limit is the pack's ``max_cell_bytes``: a string or blob longer than that is
refused while the statement builds it, so ``hex(zeroblob(200000000))`` never
allocates its 400 MB. The driver's errors are translated here and nowhere else: the database's
own message, which the argument writer and the user read, as
:class:`~proxy.errors.ToolInputRejected`, and a statement past its time as
:class:`~proxy.errors.ToolTimeout`.
"""

from __future__ import annotations

import functools
import logging
import re
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from threading import Lock
from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from proxy.config import DatabasePackSettings
from proxy.errors import ToolInputRejected, ToolTimeout
from proxy.tools.packs.database._values import CellTooBig
from proxy.tools.packs.database.demo import DEMO_URL, demo_url
from proxy.tools.packs.database.schema import Schema, reflect_schema
from proxy.tools.packs.pool import in_pack_thread

T = TypeVar("T")
log = logging.getLogger(__name__)

#: Read-only schema pragmas SQLAlchemy's reflection issues on SQLite.
_SCHEMA_PRAGMAS = frozenset(
    {
        "table_info",
        "table_xinfo",
        "foreign_key_list",
        "index_list",
        "index_info",
        "index_xinfo",
        "database_list",
        "read_uncommitted",
    }
)
_SQLITE_ALLOWED = frozenset(
    {
        sqlite3.SQLITE_SELECT,
        sqlite3.SQLITE_READ,
        sqlite3.SQLITE_TRANSACTION,
        getattr(sqlite3, "SQLITE_RECURSIVE", 33),
    }
)
_PROGRESS_STEPS = 10_000  # SQLite virtual-machine steps between two looks at the clock
_MESSAGE_CHARS = 600
#: An error that names a table or column the database does not have (SQLite, PostgreSQL).
_UNKNOWN_NAME = re.compile(
    r"no such (column|table)|(column|relation) \S+ does not exist|has no column named"
)


@dataclass
class ReadOnlyDatabase:
    """One configured database: its engine (opened lazily by SQLAlchemy) and its schema,
    reflected by the first call and again when a name is not found in it."""

    settings: DatabasePackSettings
    engine: Engine = field(init=False)
    _schema: Schema | None = field(default=None, init=False)
    _lock: Lock = field(default_factory=Lock, init=False)

    def __post_init__(self) -> None:
        self.engine = open_engine(self.settings)

    @property
    def name(self) -> str:
        return self.settings.name

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    async def run(self, work: Callable[[Connection, Schema], T]) -> T:
        """``work`` on a read-only connection and the schema, in a worker thread."""
        return await in_pack_thread(self._run, work)

    def _run(self, work: Callable[[Connection, Schema], T]) -> T:
        try:
            with self.engine.connect() as connection:
                self._begin(connection)
                try:
                    return work(connection, self.schema(connection))
                finally:
                    connection.rollback()
                    self._end(connection)
        except sa.exc.DBAPIError as exc:
            raise self._translate(exc) from None

    def reflect(self) -> Schema:
        """The schema as it is now, read on a connection of its own (blocking: for the
        catalog's load, which runs in a worker thread)."""
        return self._run(lambda connection, schema: schema)

    def schema(self, connection: Connection, *, fresh: bool = False) -> Schema:
        with self._lock:
            if self._schema is None and self.dialect == "postgresql":
                _warn_if_superuser(connection, self.name)
            if self._schema is None or fresh:
                self._schema = reflect_schema(connection)
            return self._schema

    def _begin(self, connection: Connection) -> None:
        timeout = self.settings.statement_timeout
        if self.dialect == "postgresql":
            connection.exec_driver_sql("SET TRANSACTION READ ONLY")
            connection.exec_driver_sql(f"SET LOCAL statement_timeout = {int(timeout * 1000)}")
            return
        raw = connection.connection.driver_connection
        if isinstance(raw, sqlite3.Connection):
            deadline = time.monotonic() + timeout
            raw.set_progress_handler(lambda: int(time.monotonic() > deadline), _PROGRESS_STEPS)

    def _end(self, connection: Connection) -> None:
        raw = connection.connection.driver_connection
        if isinstance(raw, sqlite3.Connection):
            raw.set_progress_handler(None, 0)

    def _translate(self, exc: sa.exc.DBAPIError) -> ToolInputRejected | ToolTimeout:
        message = " ".join(str(exc.orig).split())[:_MESSAGE_CHARS]
        limit = f"{self.settings.statement_timeout:g}"
        if message == "string or blob too big":  # SQLite's length limit, see _lock_sqlite
            return CellTooBig(self.name, self.settings.max_cell_bytes)
        if self.dialect == "sqlite" and message == "interrupted":
            return ToolTimeout(
                f"{self.name}: the statement ran past {limit} s (interrupted)", param=self.name
            )
        if "statement timeout" in message:
            return ToolTimeout(f"{self.name}: {message} ({limit} s)", param=self.name)
        if _UNKNOWN_NAME.search(message) and self._schema is not None:
            # The paper's specific error feedback: the retry sees what the names are.
            message += f". The tables and their columns: {self._schema.outline()}"
        return ToolInputRejected(f"{self.name}: {message}", param=self.name)

    def dispose(self) -> None:
        self.engine.dispose()


def _warn_if_superuser(connection: Connection, name: str) -> None:
    """A superuser may read server files and run programs inside a read-only transaction
    (``COPY … TO PROGRAM``): then only the SQL check stands in the way. Said once."""
    query = "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"
    if connection.exec_driver_sql(query).scalar():
        log.warning(
            "database %s: connected as a superuser; give the pack a role that may only SELECT",
            name,
        )


def open_engine(settings: DatabasePackSettings) -> Engine:
    """An engine that connects read-only; nothing is connected until the first call.
    ``demo`` is the music store shipped in the package (:mod:`proxy.tools.packs.database.demo`)."""
    url = sa.make_url(demo_url() if settings.url == DEMO_URL else settings.url)
    if url.get_backend_name() == "sqlite":
        return _sqlite_engine(url, settings.max_cell_bytes)
    if url.drivername == "postgresql":
        url = url.set(drivername="postgresql+psycopg")  # the driver toolgraph pins
    timeout_ms = int(settings.statement_timeout * 1000)
    options = f"-c default_transaction_read_only=on -c statement_timeout={timeout_ms}"
    return sa.create_engine(
        url,
        connect_args={"options": options, "connect_timeout": 10},
        pool_pre_ping=True,
        pool_size=4,
    )


def _sqlite_engine(url: sa.URL, max_cell_bytes: int) -> Engine:
    path = url.database or ""
    if path in ("", ":memory:") or path.startswith("file:"):
        raise ValueError(f"{url}: name a database file: sqlite:///path/to/file.db")
    uri = url.set(drivername="sqlite+pysqlite", database=f"file:{path}").update_query_dict(
        {"mode": "ro", "uri": "true"}
    )
    engine = sa.create_engine(uri, connect_args={"check_same_thread": False})
    event.listen(engine, "connect", functools.partial(_lock_sqlite, max_cell_bytes))
    return engine


def _lock_sqlite(max_cell_bytes: int, connection: object, record: object) -> None:
    assert isinstance(connection, sqlite3.Connection)
    connection.execute("PRAGMA query_only = ON")
    connection.set_authorizer(_authorize)
    connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max_cell_bytes)


def _authorize(action: int, first: str | None, second: str | None, *_: str | None) -> int:
    if action in _SQLITE_ALLOWED:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_PRAGMA and first in _SCHEMA_PRAGMAS:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_FUNCTION and second not in {"load_extension", "fts3_tokenizer"}:
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY
