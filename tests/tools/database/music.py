"""A small music store, the same rows in SQLite and PostgreSQL, with answers known by hand.

German customers: Hannah Schmidt bought 4 jazz tracks (invoices 1 and 3), Lukas Weber 1.
Revenue by country: Germany 6.84, USA 2.97, Portugal 2.97, France 1.29.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import sqlalchemy as sa

from testing.postgres_server import PostgresServer

READER, READER_PASSWORD = "reader", "reader-pw-0123456789"

_TABLES = """
CREATE TABLE artists (artist_id INTEGER PRIMARY KEY, name VARCHAR(120) NOT NULL);
CREATE TABLE albums (
    album_id INTEGER PRIMARY KEY, title VARCHAR(160) NOT NULL,
    artist_id INTEGER NOT NULL REFERENCES artists (artist_id));
CREATE TABLE genres (genre_id INTEGER PRIMARY KEY, name VARCHAR(120) NOT NULL);
CREATE TABLE tracks (
    track_id INTEGER PRIMARY KEY, name VARCHAR(200) NOT NULL,
    album_id INTEGER REFERENCES albums (album_id), genre_id INTEGER REFERENCES genres (genre_id),
    unit_price NUMERIC(4, 2) NOT NULL);
CREATE TABLE customers (
    customer_id INTEGER PRIMARY KEY, first_name VARCHAR(40) NOT NULL,
    last_name VARCHAR(40) NOT NULL, city VARCHAR(40), country VARCHAR(40));
CREATE TABLE invoices (
    invoice_id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers (customer_id),
    invoice_date {timestamp} NOT NULL, billing_country VARCHAR(40));
CREATE TABLE invoice_lines (
    line_id INTEGER PRIMARY KEY, invoice_id INTEGER NOT NULL REFERENCES invoices (invoice_id),
    track_id INTEGER NOT NULL REFERENCES tracks (track_id), unit_price NUMERIC(4, 2) NOT NULL,
    quantity INTEGER NOT NULL)
"""

ROWS: dict[str, list[tuple[object, ...]]] = {
    "artists": [(1, "Miles Davis"), (2, "John Coltrane"), (3, "Led Zeppelin"), (4, "Glenn Gould")],
    "albums": [
        (1, "Kind of Blue", 1),
        (2, "Blue Train", 2),
        (3, "Led Zeppelin IV", 3),
        (4, "Goldberg Variations", 4),
    ],
    "genres": [(1, "Jazz"), (2, "Rock"), (3, "Classical")],
    "tracks": [
        (1, "So What", 1, 1, 0.99),
        (2, "Freddie Freeloader", 1, 1, 0.99),
        (3, "Blue Train", 2, 1, 1.29),
        (4, "Moment's Notice", 2, 1, 1.29),
        (5, "Black Dog", 3, 2, 0.99),
        (6, "Stairway to Heaven", 3, 2, 1.29),
        (7, "Aria", 4, 3, 0.99),
        (8, "Variation 1", 4, 3, 0.99),
    ],
    "customers": [
        (1, "Hannah", "Schmidt", "Berlin", "Germany"),
        (2, "Lukas", "Weber", "Munich", "Germany"),
        (3, "Emma", "Dubois", "Paris", "France"),
        (4, "John", "Smith", "Boston", "USA"),
        (5, "Ana", "Silva", "Lisbon", "Portugal"),
    ],
    "invoices": [
        (1, 1, "2021-01-05 10:00:00", "Germany"),
        (2, 2, "2021-02-11 12:30:00", "Germany"),
        (3, 1, "2021-03-20 09:15:00", "Germany"),
        (4, 3, "2021-04-02 18:00:00", "France"),
        (5, 4, "2022-01-15 08:00:00", "USA"),
        (6, 5, "2022-06-30 20:45:00", "Portugal"),
    ],
    "invoice_lines": [
        (1, 1, 1, 0.99, 1),
        (2, 1, 3, 1.29, 2),
        (3, 2, 2, 0.99, 1),
        (4, 2, 5, 0.99, 1),
        (5, 3, 4, 1.29, 1),
        (6, 4, 6, 1.29, 1),
        (7, 5, 1, 0.99, 3),
        (8, 6, 7, 0.99, 1),
        (9, 6, 8, 0.99, 2),
    ],
}


def build_sqlite(path: Path) -> str:
    """The store as a SQLite file; its URL."""
    connection = sqlite3.connect(path)
    connection.executescript(_TABLES.format(timestamp="TEXT") + ";")
    for table, rows in ROWS.items():
        marks = ", ".join("?" * len(rows[0]))
        connection.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
    connection.commit()
    connection.close()
    return f"sqlite:///{path}"


def build_postgres(server: PostgresServer, database: str = "music") -> str:
    """The store as a PostgreSQL database, readable (only) by a role of its own; that
    role's URL."""
    server.execute(f"CREATE DATABASE {database}")
    engine = sa.create_engine(server.superuser_url.rsplit("/", 1)[0] + f"/{database}")
    with engine.begin() as connection:
        for statement in _TABLES.format(timestamp="TIMESTAMP").split(";"):
            connection.exec_driver_sql(statement)
        for table, rows in ROWS.items():
            names = [f"c{i}" for i in range(len(rows[0]))]
            insert = sa.text(f"INSERT INTO {table} VALUES ({', '.join(':' + n for n in names)})")
            connection.execute(insert, [dict(zip(names, row, strict=True)) for row in rows])
        connection.exec_driver_sql(
            f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{READER}') THEN "
            f"CREATE ROLE {READER} LOGIN PASSWORD '{READER_PASSWORD}'; END IF; END $$"
        )
        connection.exec_driver_sql(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {READER}")
    engine.dispose()
    return server.url(READER, READER_PASSWORD, database)


def superuser_url(server: PostgresServer, database: str = "music") -> str:
    return server.superuser_url.rsplit("/", 1)[0] + f"/{database}"
