"""The music store in both engines, opened through the pack as a user would configure it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from proxy.config import DatabasePackSettings
from proxy.tools.packs.database.catalog import DatabasePack
from proxy.tools.packs.database.engine import ReadOnlyDatabase
from testing.postgres_server import PostgresServer
from tests.tools.database.music import build_postgres, build_sqlite

ENGINES = ("sqlite", "postgres")


@pytest.fixture(scope="session")
def sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_sqlite(tmp_path_factory.mktemp("music") / "music.db")


@pytest.fixture(scope="session")
def postgres_url(postgres: PostgresServer) -> str:
    """The music database on the test cluster, as its read-only role sees it."""
    return build_postgres(postgres)


def open_pack(url: str, **settings: Any) -> DatabasePack:
    return DatabasePack.open([DatabasePackSettings(name="music", url=url, **settings)])


@pytest.fixture(params=ENGINES)
def engine_url(request: pytest.FixtureRequest) -> str:
    url: str = request.getfixturevalue(f"{request.param}_url")
    return url


@pytest.fixture
def pack(engine_url: str) -> Iterator[DatabasePack]:
    opened = open_pack(engine_url)
    yield opened
    opened.close()


@pytest.fixture
def db(pack: DatabasePack) -> ReadOnlyDatabase:
    return pack.databases[0]


def sqlite_path(url: str) -> Path:
    return Path(url.removeprefix("sqlite:///"))
