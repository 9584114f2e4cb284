"""What only the Neo4j backend has: a server that can go away and come back."""

from __future__ import annotations

from pathlib import Path

import pytest

from graph_store.errors import StoreUnavailable
from graph_store.neo4j_store import Neo4jStore
from testing.arcadedb_server import ArcadeDBServer, ArcadeDBUnavailable
from tests.graph_store.conftest import unavailable
from tests.graph_store.tools import make_tool


def test_a_lost_server_is_one_clear_error_and_the_store_reconnects(tmp_path: Path) -> None:
    server = ArcadeDBServer(tmp_path)
    try:
        server.start()
    except ArcadeDBUnavailable as exc:
        unavailable(str(exc))
    try:
        store = Neo4jStore.from_uri(server.uri, retry_seconds=1.0)
        store.upsert_tools([make_tool("search_hotels")])
        server.stop()
        with pytest.raises(StoreUnavailable, match="Neo4j is unreachable"):
            store.count_tools()
        server.start()
        assert [tool.name for tool in store.list_tools()] == ["search_hotels"]
        store.close()
    finally:
        server.stop()


def test_a_wrong_password_is_reported(bolt_uri: str) -> None:
    wrong = bolt_uri.replace(":toolgraph-test-pw@", ":not-the-password@")
    assert wrong != bolt_uri
    with pytest.raises(StoreUnavailable):
        Neo4jStore.from_uri(wrong, retry_seconds=0.5)


def test_nothing_listening_is_reported() -> None:
    with pytest.raises(StoreUnavailable, match="unreachable"):
        Neo4jStore.from_uri("bolt://neo4j:pw@127.0.0.1:1/db", retry_seconds=0.5)
