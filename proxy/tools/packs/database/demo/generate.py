"""Write the demo music store: a seeded generator, so the same code writes the same rows.

    python -m proxy.tools.packs.database.demo.generate [PATH]   # default: the shipped shop.sqlite

Ten genres, 60 artists, 150 albums (one genre each, which their tracks share), about
1,500 tracks, 200 customers in 12 countries, 800 invoices from 2021 to 2024 and
their lines (about 3,000). Names are drawn from word lists written here: no row
comes from a real catalog. ``invoices.total`` is the sum of its lines, rounded to
cents, as a shop's system would store it.
"""

from __future__ import annotations

import random
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path

from proxy.tools.packs.database.demo import DEMO

SEED = 18  # the number
SCHEMA = """
CREATE TABLE genres (genre_id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE artists (artist_id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE albums (
    album_id INTEGER PRIMARY KEY, title TEXT NOT NULL,
    artist_id INTEGER NOT NULL REFERENCES artists (artist_id), release_year INTEGER NOT NULL);
CREATE TABLE tracks (
    track_id INTEGER PRIMARY KEY, name TEXT NOT NULL,
    album_id INTEGER NOT NULL REFERENCES albums (album_id),
    genre_id INTEGER NOT NULL REFERENCES genres (genre_id),
    milliseconds INTEGER NOT NULL, unit_price REAL NOT NULL);
CREATE TABLE customers (
    customer_id INTEGER PRIMARY KEY, first_name TEXT NOT NULL, last_name TEXT NOT NULL,
    email TEXT NOT NULL, city TEXT NOT NULL, country TEXT NOT NULL);
CREATE TABLE invoices (
    invoice_id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers (customer_id),
    invoice_date TEXT NOT NULL, total REAL NOT NULL);
CREATE TABLE invoice_lines (
    invoice_line_id INTEGER PRIMARY KEY,
    invoice_id INTEGER NOT NULL REFERENCES invoices (invoice_id),
    track_id INTEGER NOT NULL REFERENCES tracks (track_id),
    unit_price REAL NOT NULL, quantity INTEGER NOT NULL);
"""

#: Genres with their weight in the catalog (Rock has the most tracks by design).
GENRES = (("Rock", 30), ("Jazz", 16), ("Pop", 14), ("Classical", 10), ("Blues", 8),
          ("Electronic", 7), ("Hip Hop", 6), ("Folk", 4), ("Reggae", 3), ("Latin", 2))  # fmt: skip
#: Countries with their cities and their weight among customers.
COUNTRIES = (
    ("USA", ("New York", "Chicago", "Austin", "Seattle", "Boston"), 40),
    ("Germany", ("Berlin", "Hamburg", "Munich", "Cologne"), 26),
    ("France", ("Paris", "Lyon", "Marseille", "Bordeaux"), 22),
    ("United Kingdom", ("London", "Manchester", "Edinburgh"), 20),
    ("Canada", ("Toronto", "Montreal", "Vancouver"), 18),
    ("Brazil", ("Sao Paulo", "Rio de Janeiro", "Brasilia"), 16),
    ("Italy", ("Rome", "Milan", "Turin"), 14),
    ("Spain", ("Madrid", "Barcelona", "Valencia"), 12),
    ("Netherlands", ("Amsterdam", "Utrecht"), 10),
    ("Sweden", ("Stockholm", "Gothenburg"), 9),
    ("Japan", ("Tokyo", "Osaka"), 8),
    ("Australia", ("Sydney", "Melbourne"), 5),
)
FIRST = ("Anna", "Ben", "Clara", "David", "Elena", "Felix", "Grace", "Hugo", "Ines", "Jonas",
         "Karin", "Luca", "Maria", "Noah", "Olga", "Paul", "Rosa", "Sven", "Tara", "Victor",
         "Wanda", "Yusuf", "Zoe", "Marco", "Lena", "Omar", "Nina", "Erik", "Julia",
         "Tomas")  # fmt: skip
LAST = ("Adler", "Berg", "Costa", "Dubois", "Eriksen", "Fischer", "Garcia", "Hoffmann",
        "Ito", "Jensen", "Keller", "Lambert", "Moreau", "Novak", "Olsen", "Peters", "Rossi",
        "Schmidt", "Tanaka", "Urban", "Vogel", "Walker", "Young", "Zimmer", "Silva", "Brooks",
        "Martin", "Meyer", "Larsen", "Santos")  # fmt: skip
WORDS = ("Blue", "Midnight", "River", "Golden", "Silent", "Electric", "Velvet", "Northern",
         "Paper", "Glass", "Summer", "Winter", "Crimson", "Hollow", "Neon", "Silver", "Wild",
         "Quiet", "Broken", "Distant", "Morning", "Ocean", "Stone", "Fire", "Shadow", "Echo",
         "Lantern", "Harbor", "Orchard", "Meadow", "Thunder", "Satellite", "Canyon",
         "Feather")  # fmt: skip
NOUNS = ("Lights", "Roads", "Letters", "Dreams", "Waves", "Hours", "Gardens", "Streets",
         "Signals", "Mirrors", "Rooms", "Skies", "Birds", "Tides", "Voices", "Hearts")  # fmt: skip
BANDS = ("Quartet", "Trio", "Collective", "Orchestra", "Ensemble", "Band", "Project", "Society")
PRICES = (0.99, 0.99, 0.99, 1.29)
ARTISTS, ALBUMS, CUSTOMERS, INVOICES = 60, 150, 200, 800
Rows = list[tuple[object, ...]]


def generate(path: Path, seed: int = SEED) -> None:
    """Write the database to ``path`` (replaced if it exists)."""
    path.unlink(missing_ok=True)
    rng = random.Random(seed)
    with sqlite3.connect(path) as connection:
        connection.executescript(SCHEMA)
        for table, rows in _rows(rng):
            marks = ", ".join("?" * len(rows[0]))
            connection.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
    connection.close()


def _rows(rng: random.Random) -> list[tuple[str, Rows]]:
    genres: Rows = [(i, name) for i, (name, _) in enumerate(GENRES, 1)]
    artists = _artists(rng)
    albums, album_genre = _albums(rng)
    tracks = _tracks(rng, album_genre)
    customers = _customers(rng)
    invoices, lines = _invoices(rng, tracks)
    return [("genres", genres), ("artists", artists), ("albums", albums), ("tracks", tracks),
            ("customers", customers), ("invoices", invoices), ("invoice_lines", lines)]  # fmt: skip


def _artists(rng: random.Random) -> Rows:
    names: list[str] = []
    while len(names) < ARTISTS:
        if rng.random() < 0.5:
            name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
        else:
            name = f"The {rng.choice(WORDS)} {rng.choice(BANDS)}"
        if name not in names:
            names.append(name)
    return [(i, name) for i, name in enumerate(names, 1)]


def _albums(rng: random.Random) -> tuple[Rows, dict[int, int]]:
    weights = [weight for _, weight in GENRES]
    artist_genre = {a: rng.choices(range(1, len(GENRES) + 1), weights)[0]
                    for a in range(1, ARTISTS + 1)}  # fmt: skip
    titles: list[str] = []
    while len(titles) < ALBUMS:
        title = f"{rng.choice(WORDS)} {rng.choice(NOUNS)}"
        if title not in titles:
            titles.append(title)
    albums: Rows = []
    genre_of = {}
    for album_id, title in enumerate(titles, 1):
        artist = album_id if album_id <= ARTISTS else rng.randint(1, ARTISTS)
        albums.append((album_id, title, artist, rng.randint(1968, 2023)))
        genre_of[album_id] = artist_genre[artist]
    return albums, genre_of


def _tracks(rng: random.Random, genre_of: dict[int, int]) -> Rows:
    tracks: Rows = []
    for album_id, genre in genre_of.items():
        for _ in range(rng.randint(6, 14)):
            name = f"{rng.choice(WORDS)} {rng.choice(NOUNS)}"
            length = rng.randint(120_000, 420_000)
            tracks.append((len(tracks) + 1, name, album_id, genre, length, rng.choice(PRICES)))
    return tracks


def _customers(rng: random.Random) -> Rows:
    weights = [weight for *_, weight in COUNTRIES]
    customers: Rows = []
    for customer_id in range(1, CUSTOMERS + 1):
        country, cities, _ = rng.choices(COUNTRIES, weights)[0]
        first, last = rng.choice(FIRST), rng.choice(LAST)
        email = f"{first}.{last}{customer_id}@example.com".lower()
        customers.append((customer_id, first, last, email, rng.choice(cities), country))
    return customers


def _invoices(rng: random.Random, tracks: Sequence[tuple[object, ...]]) -> tuple[Rows, Rows]:
    invoices: Rows = []
    lines: Rows = []
    for invoice_id in range(1, INVOICES + 1):
        date = f"{rng.randint(2021, 2024)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        total = 0.0
        for track in rng.sample(tracks, rng.randint(1, 7)):
            price, quantity = float(str(track[5])), rng.choice((1, 1, 1, 2))
            lines.append((len(lines) + 1, invoice_id, track[0], price, quantity))
            total += price * quantity
        invoices.append((invoice_id, rng.randint(1, CUSTOMERS), date, round(total, 2)))
    return invoices, lines


def main(argv: Sequence[str]) -> int:
    path = Path(argv[0]) if argv else DEMO
    generate(path)
    print(f"wrote {path} ({path.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
