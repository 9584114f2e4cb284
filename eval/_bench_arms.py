"""Two versions of the code in one benchmark run: a proxy served from a source tree
in a process of its own, and an earlier commit's tree to serve the same way.

A run that compares "before" and "after" in separate sessions on a shared machine
compares two loads more than two versions; serving both at once and interleaving
their requests lets the load fall on both alike. Each proxy process logs as
``toolgraph serve`` does (:func:`proxy.logs.configure_logging`), and its CPU time
(every thread, from ``/proc``) is read around the requests sent to it: the model (the
fake upstream) lives in the benchmark's process and the sandboxed tools in processes
of their own, so that CPU time is toolgraph's own work, which load moves much less
than wall time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from testing.ports import free_port

#: The server: settings as JSON in argv[1], the port in argv[2]; run in the tree's root.
_LAUNCH = """
import json, sys
import uvicorn
from proxy.app import create_app
from proxy.config import load_settings
from proxy.logs import configure_logging
settings = load_settings(**json.loads(sys.argv[1]))
configure_logging(settings.log_level)
uvicorn.run(create_app(settings), host="127.0.0.1", port=int(sys.argv[2]), loop="uvloop",
            http="httptools", ws="none", access_log=False, log_config=None)
"""
ROOT = Path(__file__).resolve().parent.parent
_TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Arm:
    """A proxy process serving one tree: its label, URL and pid."""

    label: str
    url: str
    pid: int

    def cpu_seconds(self) -> float:
        """User and system CPU of the process so far, every thread, exited ones too."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK


@contextmanager
def serve_tree(
    label: str, tree: Path, settings: dict[str, Any], timeout: float = 600
) -> Iterator[Arm]:
    """The proxy of ``tree`` with ``settings`` (``load_settings``'s keywords), once its
    catalog is loaded; stopped after."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1"}
    process = subprocess.Popen(
        [sys.executable, "-c", _LAUNCH, json.dumps(settings, default=str), str(port)],
        cwd=tree,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, process, time.monotonic() + timeout)
        yield Arm(label, url, process.pid)
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_ready(url: str, process: subprocess.Popen[bytes], deadline: float) -> None:
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the proxy at {url} exited with {process.returncode}")
        try:
            if httpx.get(f"{url}/readyz", timeout=30).json().get("status") != "loading":
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"the proxy at {url} was not ready in time")


@contextmanager
def tree_at(revision: str) -> Iterator[Path]:
    """The repository's files at ``revision`` (``git archive``), in a temporary folder."""
    with tempfile.TemporaryDirectory(prefix="toolgraph-baseline-") as folder:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", "--format=tar", revision],
            check=True,
            capture_output=True,
        ).stdout
        with tempfile.TemporaryFile() as tar_file:
            tar_file.write(archive)
            tar_file.seek(0)
            with tarfile.open(fileobj=tar_file) as tar:
                tar.extractall(folder, filter="data")
        yield Path(folder)


def commit_of(revision: str) -> str:
    """The short hash ``revision`` names."""
    return subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", revision],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
