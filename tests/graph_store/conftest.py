"""Fixtures of the graph_store tests: both backends, and the shared data sets.

The Neo4j backend runs against the Bolt server of ArcadeDB (the ``bolt_uri`` fixture of
``tests/conftest.py``). Under ``CI=true`` missing data fails the tests.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval.data_folder import data_folder
from graph_store.embedded import InProcessStore
from graph_store.neo4j_store import Neo4jStore
from graph_store.store import GraphStore
from tests.conftest import unavailable

IN_CI = os.environ.get("CI") == "true"
FIXTURES = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The evaluations' data folder (``EVAL_DATA``, else ``../shared/data``)."""
    folder = data_folder()
    if not (folder / "toolbench_stable").is_dir():
        unavailable(f"the shared data sets are not at {folder} (set EVAL_DATA)")
    return folder


@pytest.fixture(scope="session")
def neo4j_store(bolt_uri: str) -> Iterator[Neo4jStore]:
    store = Neo4jStore.from_uri(bolt_uri)
    yield store
    store.close()


@pytest.fixture(params=["in_process", "neo4j"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[GraphStore]:
    """An empty store of each backend; the suite that takes it runs against both."""
    if request.param == "in_process":
        yield InProcessStore.open(tmp_path / "graph")
        return
    neo4j: Neo4jStore = request.getfixturevalue("neo4j_store")
    neo4j.clear()
    yield neo4j
    neo4j.clear()


@pytest.fixture
def twin(store: GraphStore, request: pytest.FixtureRequest) -> Iterator[GraphStore]:
    """A second handle on ``store``'s data, as another worker or replica holds it."""
    if isinstance(store, InProcessStore):
        assert store.directory is not None
        yield InProcessStore.open(store.directory)
        return
    other = Neo4jStore.from_uri(request.getfixturevalue("bolt_uri"))
    yield other
    other.close()
