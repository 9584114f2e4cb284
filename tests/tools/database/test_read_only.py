"""Nothing writes through the database pack: hostile SQL is refused before it reaches
the database, and the connection could not have written it anyway.

Two walls, each tested alone: the SQL check (shown to act before the database by
pointing the pack at a port nobody listens on: the refusal comes, the connection
error does not), and the read-only connection (the same statements sent past the
check, straight down the pack's own connection: the database refuses them with its
own message, and the rows are still all there).
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.engine import Connection

from proxy.errors import ToolInputRejected, ToolTimeout
from proxy.tools.packs.database.catalog import DatabasePack
from proxy.tools.packs.database.engine import ReadOnlyDatabase
from proxy.tools.packs.database.guard import StatementRefused, check_select
from proxy.tools.packs.database.schema import Schema
from testing.postgres_server import PostgresServer
from tests.conftest import free_port
from tests.tools.database.conftest import open_pack
from tests.tools.database.music import superuser_url

HOSTILE = [
    "DELETE FROM customers",
    "UPDATE customers SET country = 'Nowhere'",
    "INSERT INTO genres VALUES (9, 'Polka')",
    "DROP TABLE customers",
    "CREATE TABLE loot AS SELECT * FROM customers",
    "SELECT * INTO loot FROM customers",
    "ALTER TABLE customers ADD COLUMN x INTEGER",
    "TRUNCATE customers",
    "SELECT 1; DELETE FROM customers",
    "SELECT 1; SELECT 2",
    "WITH gone AS (DELETE FROM customers RETURNING *) SELECT count(*) FROM gone",
    "SELECT * FROM customers FOR UPDATE",
    "ATTACH DATABASE '/tmp/toolgraph-attached.db' AS other",
    "DETACH DATABASE other",
    "PRAGMA journal_mode = DELETE",
    "PRAGMA query_only = OFF",
    "SELECT load_extension('/tmp/evil.so')",
    "COPY customers TO PROGRAM 'touch /tmp/toolgraph-pwned'",
    "COPY customers FROM '/etc/passwd'",
    "SELECT pg_read_file('/etc/passwd')",
    "SELECT * FROM pg_ls_dir('.')",
    "SELECT lo_import('/etc/passwd')",
    "SELECT set_config('default_transaction_read_only', 'off', false)",
    "SELECT nextval('customers_id_seq')",
    "SELECT pg_sleep(60)",
    "SELECT query_to_xml('DELETE FROM customers', true, true, '')",
    "SET default_transaction_read_only = off",
    "BEGIN",
    "COMMIT",
    "VACUUM",
    "GRANT ALL ON customers TO PUBLIC",
    "SELECT * FROM customers WHERE",  # does not parse
]


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
@pytest.mark.parametrize("sql", HOSTILE)
def test_the_check_refuses_hostile_sql(sql: str, dialect: str) -> None:
    with pytest.raises(StatementRefused):
        check_select(sql, dialect)


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM customers",
        "SELECT country, count(*) FROM customers GROUP BY country HAVING count(*) > 1",
        "WITH g AS (SELECT * FROM genres) SELECT name FROM g UNION SELECT name FROM artists",
        "SELECT name FROM artists WHERE name LIKE '%;DROP TABLE x%' -- ; DELETE",
        "SELECT lower(name), substr(name, 1, 3), coalesce(city, '?') FROM customers",
    ],
)
def test_the_check_lets_reads_through(sql: str, dialect: str) -> None:
    check_select(sql, dialect)


@pytest.mark.parametrize("engine", ["sqlite:////nonexistent/dir/music.db", "postgresql"])
@pytest.mark.parametrize("sql", HOSTILE)
async def test_hostile_sql_never_reaches_the_database(sql: str, engine: str) -> None:
    url = engine if engine.startswith("sqlite") else f"postgresql://x:y@127.0.0.1:{free_port()}/db"
    pack = open_pack(url)
    try:
        with pytest.raises(StatementRefused):  # not a connection error: nothing was sent
            await pack.functions()["music_run_select"]({"sql": sql})
    finally:
        pack.close()


@pytest.mark.parametrize(
    "where",
    [
        "1 = 1; DELETE FROM invoices",
        "invoice_id IN (SELECT pg_read_file('/etc/passwd'))",
        "1 = 1 UNION SELECT 1 FROM invoices FOR UPDATE",
    ],
)
async def test_check_where_refuses_hostile_conditions(pack: DatabasePack, where: str) -> None:
    with pytest.raises(StatementRefused):
        await pack.functions()["music_check_where"]({"table": "invoices", "where": where})


async def send_past_the_check(db: ReadOnlyDatabase, sql: str) -> None:
    def work(connection: Connection, schema: Schema) -> None:
        connection.exec_driver_sql(sql)

    await db.run(work)


async def customers(db: ReadOnlyDatabase) -> int:
    def work(connection: Connection, schema: Schema) -> int:
        return int(connection.exec_driver_sql("SELECT count(*) FROM customers").scalar_one())

    return await db.run(work)


SQLITE_WALL = [
    ("DELETE FROM customers", "not authorized"),
    ("INSERT INTO genres VALUES (9, 'Polka')", "not authorized"),
    ("DROP TABLE customers", "not authorized"),
    ("CREATE TEMP TABLE loot (x)", "not authorized"),
    ("ATTACH DATABASE '/tmp/toolgraph-attached.db' AS other", "not authorized"),
    ("PRAGMA query_only = OFF", "not authorized"),
    ("PRAGMA journal_mode = DELETE", "not authorized"),
    ("SELECT load_extension('/tmp/evil.so')", "not authorized"),
    ("VACUUM", "authorization denied"),
]


@pytest.mark.parametrize(("sql", "says"), SQLITE_WALL)
async def test_the_sqlite_connection_cannot_write(sqlite_url: str, sql: str, says: str) -> None:
    pack = open_pack(sqlite_url)
    db = pack.databases[0]
    try:
        with pytest.raises(ToolInputRejected) as raised:
            await send_past_the_check(db, sql)
        assert says in raised.value.message
        assert await customers(db) == 5
    finally:
        pack.close()


async def test_sqlite_opens_read_only_even_without_the_authorizer(sqlite_url: str) -> None:
    """``mode=ro`` alone: the file cannot be written by this connection."""
    pack = open_pack(sqlite_url)
    try:
        with pack.databases[0].engine.connect() as connection:
            raw: Any = connection.connection.driver_connection
            raw.set_authorizer(None)
            raw.execute("PRAGMA query_only = OFF")
            with pytest.raises(Exception, match="readonly database"):
                raw.execute("DELETE FROM customers")
    finally:
        pack.close()


POSTGRES_WALL = [
    ("DELETE FROM customers", "cannot execute DELETE in a read-only transaction"),
    ("INSERT INTO genres VALUES (9, 'Polka')", "cannot execute INSERT in a read-only transaction"),
    ("CREATE TABLE loot (x int)", "cannot execute CREATE TABLE in a read-only transaction"),
    ("SELECT * INTO loot FROM customers", "read-only transaction"),
    ("COPY customers TO PROGRAM 'touch /tmp/toolgraph-pwned'", "pg_execute_server_program"),
    ("SELECT pg_read_file('/etc/passwd')", "permission denied for function pg_read_file"),
    ("SELECT lo_import('/etc/passwd')", "lo_import"),
]


WRITES = [(sql, says) for sql, says in POSTGRES_WALL if "read-only transaction" in says]


@pytest.mark.parametrize(
    ("role", "sql", "says"),
    [("reader", sql, says) for sql, says in POSTGRES_WALL]
    # A superuser (a misconfiguration) may read files and run programs, which only the
    # check stops; the read-only transaction still stops every write.
    + [("superuser", sql, says) for sql, says in WRITES],
)
async def test_the_postgres_connection_cannot_write(
    postgres: PostgresServer, postgres_url: str, role: str, sql: str, says: str
) -> None:
    """As the read-only role every statement fails with PostgreSQL's own message."""
    pack = open_pack(superuser_url(postgres) if role == "superuser" else postgres_url)
    db = pack.databases[0]
    try:
        with pytest.raises(ToolInputRejected) as raised:
            await send_past_the_check(db, sql)
        assert says in raised.value.message
        assert await customers(db) == 5
    finally:
        pack.close()


async def test_the_model_cannot_turn_read_only_off_for_later_calls(postgres_url: str) -> None:
    pack = open_pack(postgres_url)
    db = pack.databases[0]
    try:
        await send_past_the_check(db, "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE")
        with pytest.raises(ToolInputRejected, match="read-only transaction"):
            await send_past_the_check(db, "DELETE FROM customers")
    finally:
        pack.close()


LONG = {
    "sqlite": "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n LIMIT 100000) "
    "SELECT count(*) FROM n a, n b",
    "postgres": "SELECT count(*) FROM generate_series(1, 100000000) a, generate_series(1, 100000000) b",
}


async def test_a_long_cross_join_hits_the_timeout(engine_url: str) -> None:
    pack = open_pack(engine_url, statement_timeout=0.5)
    engine = "sqlite" if engine_url.startswith("sqlite") else "postgres"
    try:
        with pytest.raises(ToolTimeout):
            await pack.functions()["music_run_select"]({"sql": LONG[engine]})
        # the connection is fine afterwards
        answer = await pack.functions()["music_run_select"]({"sql": "SELECT count(*) FROM genres"})
    finally:
        pack.close()
    assert answer["rows"] == [[3]]


async def test_a_superuser_connection_is_warned_about(
    postgres: PostgresServer, postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    for url in (postgres_url, superuser_url(postgres)):
        pack = open_pack(url)
        try:
            await pack.functions()["music_list_tables"]({})
        finally:
            pack.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == [
        "database music: connected as a superuser; give the pack a role that may only SELECT"
    ]
