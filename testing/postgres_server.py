"""A throw-away PostgreSQL cluster, for testing and measuring the database pack.

Debian's ``postgresql`` package puts its binaries in ``/usr/lib/postgresql/<major>/bin``
(not on ``PATH``); the newest there is used, else ``initdb`` on ``PATH``. The cluster
lives in a temporary directory, listens on 127.0.0.1 on a free port with trust
authentication for loopback, runs with ``fsync=off``, and is stopped by its PID and
deleted. ``initdb`` refuses to run as root, so as root the server's processes run as
the ``postgres`` user (the package creates it), in a directory that user owns.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import ModuleType, TracebackType

from testing.ports import free_port

_DEBIAN = Path("/usr/lib/postgresql")


def _psycopg() -> ModuleType:
    """psycopg, imported when a cluster is used: it comes with the [packs] extra, and a
    core install's tests import this module without starting a cluster."""
    import psycopg

    return psycopg


class PostgresUnavailable(RuntimeError):
    """The cluster could not be made or started; the message says why."""


def binaries() -> Path:
    """The folder of ``initdb`` and ``postgres``: the newest Debian major, else ``PATH``."""
    majors = sorted(
        (p for p in _DEBIAN.glob("*/bin") if (p / "initdb").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    if majors:
        return majors[-1]
    found = shutil.which("initdb")
    if found is None:
        raise PostgresUnavailable("PostgreSQL is not installed (apt-get install postgresql)")
    return Path(found).parent


class PostgresServer:
    def __init__(self, user: str = "postgres") -> None:
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="toolgraph-pg-"))
        account = pwd.getpwnam(user) if os.geteuid() == 0 else None
        # None: the processes run as this user (who is not root).
        self._uid = account.pw_uid if account else None
        self._gid = account.pw_gid if account else None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def superuser_url(self) -> str:
        """SQLAlchemy URL of the cluster's superuser, for setting up data."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def url(self, role: str, password: str, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{role}:{password}@127.0.0.1:{self.port}/{database}"

    def __enter__(self) -> PostgresServer:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self, timeout: float = 120.0) -> None:
        bin_dir = binaries()
        data = self.root / "data"
        if self._uid is not None and self._gid is not None:
            os.chown(self.root, self._uid, self._gid)
        self._run([str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust",
                   "-E", "UTF8", "--no-sync", "--no-instructions"])  # fmt: skip
        log = (self.root / "server.log").open("wb")
        self._process = subprocess.Popen(
            [str(bin_dir / "postgres"), "-D", str(data), "-p", str(self.port),
             "-c", "listen_addresses=127.0.0.1", "-k", str(self.root),
             "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"],
            stdout=log, stderr=subprocess.STDOUT, user=self._uid, group=self._gid,
        )  # fmt: skip
        log.close()
        self._wait_ready(time.monotonic() + timeout)

    def _run(self, command: list[str]) -> None:
        done = subprocess.run(
            command, capture_output=True, check=False, user=self._uid, group=self._gid
        )
        if done.returncode != 0:
            output = (done.stdout + done.stderr).decode(errors="replace")[-2000:]
            raise PostgresUnavailable(f"{Path(command[0]).name} failed: {output}")

    def _wait_ready(self, deadline: float) -> None:
        while True:
            assert self._process is not None
            if self._process.poll() is not None:
                raise PostgresUnavailable(f"postgres exited: {self._log_tail()}")
            try:
                _psycopg().connect(self._dsn(), connect_timeout=5).close()
                return
            except _psycopg().OperationalError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise PostgresUnavailable("postgres did not accept connections") from None
                time.sleep(0.1)

    def _dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    def execute(self, *statements: str) -> None:
        """Run set-up statements as the superuser, each committed."""
        with _psycopg().connect(self._dsn(), autocommit=True) as connection:
            for statement in statements:
                connection.execute(statement.encode())

    def _log_tail(self) -> str:
        path = self.root / "server.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)  # "fast" shutdown: sessions are ended
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        shutil.rmtree(self.root, ignore_errors=True)
