"""Running built-in tools where a hostile input cannot hurt the proxy.

Every call runs in a process of its own forked from a fork server
(:mod:`proxy.tools.sandbox.forkserver`) that has already imported SymPy and NumPy, so a
call costs no import; the child is forked (and warmed) before the call comes, so
it costs no fork either. The child caps its own CPU time
and address space (what it had at fork time plus ``memory_mb``) before it reads
the arguments, so a runaway computation ends in ``MemoryError`` or SIGXCPU inside
the child; the proxy also kills it at the wall-clock timeout. Requests and results
cross a Unix socket as length-prefixed JSON (never pickle: the child is not
trusted), both capped in size.

Why a process and not a thread with a timeout: a thread cannot be stopped, and
SymPy and NumPy run C code or hold the GIL for as long as they like. Why not
``multiprocessing``: its children re-import the parent's main module.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import signal
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from pydantic import JsonValue

from proxy.errors import (
    ToolError,
    ToolInputRejected,
    ToolResponseTooLarge,
    ToolTimeout,
    ToolUnavailable,
)
from proxy.tools.sandbox.forkserver import HEADER, MAX_REQUEST_BYTES

MAX_RESULT_BYTES = 1024 * 1024
_START_TIMEOUT = 60.0
# One BLAS thread: the fork server must stay single-threaded to fork safely.
_SERVER_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# All the server inherits of the proxy's environment: never its keys and secrets.
_INHERITED = ("PATH", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "LANG", "LC_ALL", "TMPDIR")


class Sandbox:
    """Runs ``proxy.tools.packs.math.pack`` functions in throw-away processes under limits.

    The fork server starts on the first call (or :meth:`start`); :meth:`aclose`
    stops it.
    """

    def __init__(self, timeout: float = 10.0, memory_mb: int = 1024) -> None:
        self.timeout = timeout
        self.memory_mb = memory_mb
        self._server: asyncio.subprocess.Process | None = None
        self._directory: tempfile.TemporaryDirectory[str] | None = None
        self._socket = ""
        self._lock = asyncio.Lock()

    @property
    def running(self) -> bool:
        return self._server is not None and self._server.returncode is None

    @property
    def server_pid(self) -> int | None:
        return self._server.pid if self._server is not None else None

    async def start(self) -> None:
        async with self._lock:
            if self._server is not None and self._server.returncode is None:
                return
            if self._directory is not None:  # a server that died: start afresh
                self._directory.cleanup()
            self._directory = tempfile.TemporaryDirectory(prefix="toolgraph-sandbox-")
            self._socket = str(Path(self._directory.name) / "fork.sock")
            cpu = str(math.ceil(self.timeout) + 1)
            self._server = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "proxy.tools.sandbox.forkserver",
                self._socket,
                cpu,
                str(self.memory_mb),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                env=_server_environment(),
            )
            assert self._server.stdout is not None
            async with asyncio.timeout(_START_TIMEOUT):
                line = await self._server.stdout.readline()
            if line != b"ready\n":
                raise ToolError("the built-in tools' sandbox did not start")

    async def aclose(self) -> None:
        server, self._server = self._server, None
        if server is not None and server.returncode is None:
            assert server.stdin is not None
            server.stdin.close()
            try:
                async with asyncio.timeout(5):
                    await server.wait()
            except TimeoutError:
                server.kill()
                await server.wait()
            # Reading to the end lets asyncio close the pipe's transport now, not when
            # the loop that would have seen its end is gone (a ResourceWarning).
            assert server.stdout is not None
            await server.stdout.read()
        if self._directory is not None:
            self._directory.cleanup()
            self._directory = None

    async def run(self, name: str, arguments: Mapping[str, JsonValue]) -> JsonValue:
        """Run one tool; errors are :class:`proxy.errors.ToolError` subclasses."""
        payload = json.dumps({"name": name, "arguments": dict(arguments)}).encode()
        if len(payload) > MAX_REQUEST_BYTES:
            raise ToolInputRejected(f"arguments over {MAX_REQUEST_BYTES} bytes", param=name)
        await self.start()
        try:
            reader, writer = await asyncio.open_unix_connection(self._socket)
        except OSError:
            raise ToolUnavailable(f"{name}: the sandbox is not available", param=name) from None
        pid = 0
        try:
            async with asyncio.timeout(self.timeout):
                # The child's pid comes first, so that it can be killed from here on
                # (a timeout, or the request being cancelled).
                pid = HEADER.unpack(await reader.readexactly(HEADER.size))[0]
                writer.write(HEADER.pack(len(payload)) + payload)
                await writer.drain()
                size = HEADER.unpack(await reader.readexactly(HEADER.size))[0]
                if size > MAX_RESULT_BYTES:
                    raise ToolResponseTooLarge(f"{name} returned over {MAX_RESULT_BYTES} bytes")
                data = await reader.readexactly(size)
        except TimeoutError:
            raise ToolTimeout(
                f"{name} took longer than {self.timeout:g}s and was stopped", param=name
            ) from None
        except (asyncio.IncompleteReadError, ConnectionError):
            raise ToolInputRejected(
                f"{name} ran out of memory or CPU time and was stopped", param=name
            ) from None
        finally:
            _kill(pid)
            writer.close()
        return _decode(name, data)


def _server_environment() -> dict[str, str]:
    inherited = {name: os.environ[name] for name in _INHERITED if name in os.environ}
    return {**inherited, **_SERVER_ENV}


def _kill(pid: int) -> None:
    """Stop a child that may still run (it has usually exited already)."""
    if pid:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _decode(name: str, data: bytes) -> JsonValue:
    reply = json.loads(data)
    if "error" in reply:
        error = ToolInputRejected if reply.get("kind") == "input" else ToolError
        raise error(f"{name}: {reply['error']}", param=name)
    result: JsonValue = reply["result"]
    return result
