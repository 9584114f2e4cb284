"""Per-call latency of each database-pack tool on a table of a million rows.

    python -m eval.bench_database              # 1,000,000 rows, SQLite and PostgreSQL
    python -m eval.bench_database --rows 20000 --repeat 2   # a quick look

Generates ``orders`` (``--rows`` rows: 50,000 customer names, 30 countries, 12
genres, amounts, dates written as text in SQLite and as TIMESTAMP in PostgreSQL)
beside a 30-row ``countries`` table, in a SQLite file and in a throw-away
PostgreSQL cluster (:mod:`testing.postgres_server`), and times each tool's in-process
function (the pack, not the executor around it) ``--repeat`` times, reporting the
median. No indexes beyond the primary keys: what a database handed to the pack
as it is would give. Results: a table here and ``eval/results/bench_database.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import sqlalchemy as sa
from pydantic import JsonValue

from proxy.config import DatabasePackSettings
from proxy.tools.packs.database.catalog import DatabasePack
from testing.postgres_server import PostgresServer

RESULTS = Path(__file__).resolve().parent / "results"
COUNTRIES = [f"Country{i:02d}" for i in range(29)] + ["Germany"]
GENRES = ["Jazz", "Rock", "Classical", "Pop", "Blues", "Metal", "Latin", "Reggae",
          "Soul", "Folk", "Electronic", "Hip Hop"]  # fmt: skip
TABLES = """
CREATE TABLE countries (country_id INTEGER PRIMARY KEY, name VARCHAR(40) NOT NULL);
CREATE TABLE orders (
    order_id INTEGER PRIMARY KEY, customer VARCHAR(60) NOT NULL, country VARCHAR(40) NOT NULL,
    genre VARCHAR(20) NOT NULL, amount NUMERIC(8, 2) NOT NULL, ordered_at {timestamp} NOT NULL)
"""

CALLS: list[tuple[str, dict[str, JsonValue]]] = [
    ("list_tables", {}),
    ("find_columns_containing_value", {"value": "Germany"}),
    ("find_columns_containing_value", {"value": "germny", "fuzzy": True}),
    ("get_distinct_values", {"table": "orders", "column": "genre", "limit": 20}),
    ("is_value_in_column", {"table": "orders", "column": "country", "value": "Germany"}),
    ("get_date_format", {"table": "orders", "column": "ordered_at"}),
    ("check_where", {"table": "orders", "where": "country = 'Germany' AND genre = 'Jazz'"}),
    (
        "run_select",
        {
            "sql": "SELECT customer, SUM(amount) AS total FROM orders "
            "WHERE country = 'Germany' AND genre = 'Jazz' "
            "GROUP BY customer ORDER BY total DESC LIMIT 5"
        },
    ),
]


def rows(count: int, seed: int = 7) -> Iterator[tuple[object, ...]]:
    rng = random.Random(seed)
    for i in range(1, count + 1):
        day = rng.randrange(3650)
        stamp = time.strftime(
            "%Y-%m-%d %H:%M:%S", time.gmtime(1_300_000_000 + day * 86400 + i % 86400)
        )
        yield (i, f"Customer {rng.randrange(50_000):05d}", rng.choice(COUNTRIES),
               rng.choice(GENRES), round(rng.uniform(0.99, 99.99), 2), stamp)  # fmt: skip


def build_sqlite(path: Path, count: int) -> str:
    connection = sqlite3.connect(path)
    connection.executescript(TABLES.format(timestamp="TEXT") + ";")
    connection.executemany("INSERT INTO countries VALUES (?, ?)", enumerate(COUNTRIES, 1))
    connection.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?)", rows(count))
    connection.commit()
    connection.close()
    return f"sqlite:///{path}"


def build_postgres(server: PostgresServer, count: int) -> str:
    engine = sa.create_engine(server.superuser_url)
    with engine.begin() as connection:
        for statement in TABLES.format(timestamp="TIMESTAMP").split(";"):
            connection.exec_driver_sql(statement)
        connection.execute(
            sa.text("INSERT INTO countries VALUES (:i, :n)"),
            [{"i": i, "n": n} for i, n in enumerate(COUNTRIES, 1)],
        )
        raw = connection.connection.driver_connection
        with raw.cursor().copy("COPY orders FROM STDIN") as copy:  # type: ignore[union-attr]
            for row in rows(count):
                copy.write_row(row)
        connection.exec_driver_sql("ANALYZE")
    engine.dispose()
    return server.superuser_url


async def measure(url: str, repeat: int) -> dict[str, float]:
    """Median milliseconds per call of each tool (the first call, which reflects the
    schema and opens the connection, is not counted)."""
    pack = DatabasePack.open([DatabasePackSettings(name="bench", url=url, statement_timeout=120)])
    functions = pack.functions()
    await functions["bench_list_tables"]({})
    medians: dict[str, float] = {}
    try:
        for tool, arguments in CALLS:
            label = tool + (" (fuzzy)" if arguments.get("fuzzy") else "")
            times = []
            for _ in range(repeat):
                started = time.perf_counter()
                await functions[f"bench_{tool}"](arguments)
                times.append((time.perf_counter() - started) * 1000)
            medians[label] = statistics.median(times)
    finally:
        pack.close()
    return medians


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.bench_database", description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS / "bench_database.json")
    args = parser.parse_args(argv)
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        started = time.monotonic()
        url = build_sqlite(Path(folder) / "bench.db", args.rows)
        print(f"sqlite: {args.rows:,} rows in {time.monotonic() - started:.0f} s")
        results["sqlite"] = asyncio.run(measure(url, args.repeat))
    with PostgresServer() as server:
        started = time.monotonic()
        url = build_postgres(server, args.rows)
        print(f"postgresql: {args.rows:,} rows in {time.monotonic() - started:.0f} s")
        results["postgresql"] = asyncio.run(measure(url, args.repeat))
    print("| tool | SQLite ms | PostgreSQL ms |\n| --- | --- | --- |")
    for label in results["sqlite"]:
        print(
            f"| `{label}` | {results['sqlite'][label]:,.0f} | {results['postgresql'][label]:,.0f} |"
        )
    report = {
        "rows": args.rows,
        "repeat": args.repeat,
        "load_average": os.getloadavg(),
        "machine": platform.platform(),
        "median_ms": results,
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
