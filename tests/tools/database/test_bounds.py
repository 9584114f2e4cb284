"""What one model-written statement may take: bytes per value and per answer, characters
of SQL, nesting, and threads (the pack's own, never the event loop's or asyncio's).

The value cap is shown where it acts before the value exists (SQLite refuses to build a
string or blob past its length limit: a 200 MB ``zeroblob`` is never allocated); the
answer's budget by a query whose rows together pass it; the threads by filling the
pack's pool with calls that wait on an event the test releases, so nothing here
depends on how fast the machine is.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from sqlalchemy.engine import Connection

from proxy.errors import ToolInputRejected
from proxy.tools.packs.database.catalog import DatabasePack
from proxy.tools.packs.database.engine import ReadOnlyDatabase
from proxy.tools.packs.database.guard import StatementRefused
from proxy.tools.packs.database.schema import Schema
from proxy.tools.packs.pool import PACK_THREADS
from tests.tools.database.conftest import open_pack

WIDE_ROWS = {
    "sqlite": "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n LIMIT 100) "
    "SELECT x, hex(randomblob(250)) AS wide FROM n",
    "postgres": "SELECT x, repeat('x', 500) AS wide FROM generate_series(1, 100) x",
}
NESTED = "SELECT " + "(" * 600 + "1" + ")" * 600


def engine_of(url: str) -> str:
    return "sqlite" if url.startswith("sqlite") else "postgres"


async def run_select(pack: DatabasePack, sql: str) -> Any:
    return await pack.functions()["music_run_select"]({"sql": sql})


async def test_a_huge_value_is_refused_before_sqlite_builds_it(sqlite_url: str) -> None:
    pack = open_pack(sqlite_url)
    try:
        with pytest.raises(ToolInputRejected, match=r"max_cell_bytes \(1048576 bytes\)"):
            await run_select(pack, "SELECT hex(zeroblob(200000000))")
    finally:
        pack.close()


async def test_a_value_past_the_cell_cap_is_refused(engine_url: str) -> None:
    pack = open_pack(engine_url, max_cell_bytes=4096)
    sql = {
        "sqlite": "SELECT hex(zeroblob(4096))",
        "postgres": "SELECT repeat('x', 8192)",
    }[engine_of(engine_url)]
    try:
        with pytest.raises(ToolInputRejected, match=r"max_cell_bytes \(4096 bytes\)"):
            await run_select(pack, sql)
        answer = await run_select(pack, "SELECT count(*) FROM genres")
    finally:
        pack.close()
    assert answer["rows"] == [[3]]  # the connection is fine afterwards


async def test_rows_stop_at_the_answers_byte_budget(engine_url: str) -> None:
    pack = open_pack(engine_url, max_answer_bytes=4096)
    try:
        answer = await run_select(pack, WIDE_ROWS[engine_of(engine_url)])
    finally:
        pack.close()
    assert answer["truncated"] is True
    assert 1 <= answer["row_count"] == len(answer["rows"]) <= 4096 // 500
    assert "max_answer_bytes (4096 bytes)" in answer["note"]


async def test_a_small_answer_has_no_note(engine_url: str) -> None:
    pack = open_pack(engine_url, max_answer_bytes=4096)
    try:
        answer = await run_select(pack, "SELECT name FROM genres ORDER BY name")
    finally:
        pack.close()
    assert answer["truncated"] is False
    assert "note" not in answer


async def test_sql_past_the_size_limit_is_refused_before_it_is_parsed(sqlite_url: str) -> None:
    pack = open_pack(sqlite_url, max_sql_chars=1000)
    union = " UNION ".join(f"SELECT {i}" for i in range(20_001))
    try:
        with pytest.raises(StatementRefused, match=r"max_sql_chars \(1000\)"):
            await run_select(pack, union)
        where = " OR ".join(f"invoice_id = {i}" for i in range(500))
        with pytest.raises(StatementRefused, match=r"max_sql_chars \(1000\)"):
            await pack.functions()["music_check_where"]({"table": "invoices", "where": where})
    finally:
        pack.close()


@pytest.mark.parametrize("dialect_url", ["sqlite_url", "postgres_url"])
async def test_deeply_nested_sql_is_an_input_error(
    dialect_url: str, request: pytest.FixtureRequest
) -> None:
    pack = open_pack(request.getfixturevalue(dialect_url))
    try:
        with pytest.raises(StatementRefused, match="nested too deeply"):
            await run_select(pack, NESTED)
    finally:
        pack.close()


async def hold_the_pack_pool(db: ReadOnlyDatabase, release: threading.Event) -> list[Any]:
    """``PACK_THREADS`` calls, each holding one of the pack's threads until ``release``."""

    def wait(connection: Connection, schema: Schema) -> None:
        release.wait(timeout=120)

    return [asyncio.ensure_future(db.run(wait)) for _ in range(PACK_THREADS)]


async def test_pack_calls_neither_starve_asyncio_threads_nor_parse_on_the_loop(
    sqlite_url: str,
) -> None:
    loop = asyncio.get_running_loop()
    # asyncio's own pool no bigger than the pack's: if pack calls ran there, they would fill it
    default = ThreadPoolExecutor(max_workers=PACK_THREADS)
    loop.set_default_executor(default)
    pack = open_pack(sqlite_url)
    release = threading.Event()
    try:
        held = await hold_the_pack_pool(pack.databases[0], release)
        # asyncio.to_thread still has threads while every pack thread is taken
        assert await asyncio.wait_for(asyncio.to_thread(lambda: 42), timeout=60) == 42
        # the SQL check waits for a pack thread: it does not run on the loop meanwhile
        checking = asyncio.ensure_future(run_select(pack, NESTED))
        for _ in range(20):
            await asyncio.sleep(0)
        assert not checking.done()
        release.set()
        await asyncio.gather(*held)
        with pytest.raises(StatementRefused, match="nested too deeply"):
            await checking
    finally:
        release.set()
        pack.close()
        default.shutdown(wait=False)
