"""Running built-in tools where a hostile input cannot hurt the proxy.

Every call runs in a fresh child process forked from a small server process that
has already imported SymPy and NumPy (multiprocessing's ``forkserver``: a fork
costs milliseconds, not the second an import would). The child caps its own
address space (what it had at fork time plus ``memory_mb``) and CPU time before it
reads the arguments, so ``9**9**9**9`` or a 10⁹-cell grid ends in ``MemoryError``
or SIGXCPU inside the child; the parent also kills it at the wall-clock timeout.
Results come back as JSON bytes over a pipe (never pickle: the child is not
trusted), capped in size.

Why a process and not a thread with a timeout: a thread cannot be stopped, and
SymPy and NumPy hold the GIL or run C code for arbitrarily long.
"""

from __future__ import annotations

import asyncio
import json
import math
import multiprocessing
import resource
from collections.abc import Mapping
from multiprocessing.connection import Connection
from typing import Any

from pydantic import JsonValue

from proxy.errors import ToolError, ToolInputRejected, ToolResponseTooLarge, ToolTimeout

MAX_ARGUMENT_BYTES = 64 * 1024
MAX_RESULT_BYTES = 1024 * 1024
_PACK = "proxy.tools.pack"


class Sandbox:
    """Runs ``proxy.tools.pack`` functions in throw-away processes under limits."""

    def __init__(self, timeout: float = 10.0, memory_mb: int = 1024) -> None:
        self.timeout = timeout
        self.memory_mb = memory_mb
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload([_PACK])

    async def run(self, name: str, arguments: Mapping[str, JsonValue]) -> JsonValue:
        payload = json.dumps({"name": name, "arguments": dict(arguments)}).encode()
        if len(payload) > MAX_ARGUMENT_BYTES:
            raise ToolInputRejected(f"arguments over {MAX_ARGUMENT_BYTES} bytes", param=name)
        reader, writer = self._context.Pipe(duplex=False)
        limits = (math.ceil(self.timeout) + 1, self.memory_mb)
        process = self._context.Process(
            target=_child, args=(writer, payload, limits), name=f"toolgraph-{name}", daemon=True
        )
        try:
            await asyncio.to_thread(process.start)
            writer.close()
            try:
                async with asyncio.timeout(self.timeout):
                    await _readable(reader.fileno())
            except TimeoutError:
                raise ToolTimeout(
                    f"{name} took longer than {self.timeout:g}s and was stopped", param=name
                ) from None
            return _decode(name, reader)
        finally:
            reader.close()
            writer.close()
            await _reap(process)


def _decode(name: str, reader: Connection) -> JsonValue:
    try:
        data = reader.recv_bytes(MAX_RESULT_BYTES)
    except EOFError:
        raise ToolInputRejected(
            f"{name} ran out of memory or CPU time and was stopped", param=name
        ) from None
    except OSError:
        raise ToolResponseTooLarge(f"{name} returned over {MAX_RESULT_BYTES} bytes") from None
    reply = json.loads(data)
    if "error" in reply:
        error = ToolInputRejected if reply.get("kind") == "input" else ToolError
        raise error(f"{name}: {reply['error']}", param=name)
    result: JsonValue = reply["result"]
    return result


async def _readable(fd: int) -> None:
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()
    loop.add_reader(fd, lambda: ready.done() or ready.set_result(None))
    try:
        await ready
    finally:
        loop.remove_reader(fd)


async def _reap(process: Any) -> None:
    """Kill the child if it still runs, and collect it without blocking the loop."""
    if process.pid is None:
        return
    if process.is_alive():
        process.kill()
    try:
        async with asyncio.timeout(5):
            await _readable(process.sentinel)
    except TimeoutError:
        return
    process.join(0)
    process.close()


def _child(writer: Connection, payload: bytes, limits: tuple[int, int]) -> None:
    """In the child: cap yourself, run the tool, send JSON back."""
    cpu_seconds, memory_mb = limits
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    address_space = _address_space() + memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    from proxy.tools import pack  # preloaded by the fork server: no import cost

    writer.send_bytes(pack.call_json(payload))
    writer.close()


def _address_space() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0
