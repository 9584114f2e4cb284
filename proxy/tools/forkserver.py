"""The sandbox's fork server: ``python -m proxy.tools.forkserver SOCKET``.

It imports the tool pack once, says ``ready`` on stdout, and then forks one child
per connection on the Unix socket. The child sends its pid, caps its own CPU time
and address space, reads one length-prefixed JSON request, answers it and exits.
An error raised after the child's peak address space reached its cap is reported
as running out of memory, whatever its type (what the child hit, not what the
failing library said).
The server leaves when its stdin closes (the proxy went away). It has one thread,
so forking it is safe.
"""

from __future__ import annotations

import os
import resource
import select
import signal
import socket
import struct
import sys
from collections.abc import Callable

HEADER = struct.Struct("!Q")
MAX_REQUEST_BYTES = 64 * 1024


def main(argv: list[str]) -> int:
    # Imported here, once, before any fork: the proxy imports this module for its
    # constants only and must not load SymPy for them.
    from proxy.tools import pack

    path, cpu_seconds, memory_mb = argv[0], int(argv[1]), int(argv[2])
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(128)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        readable, _, _ = select.select([listener, sys.stdin], [], [])
        if sys.stdin in readable and not os.read(sys.stdin.fileno(), 1024):
            return 0
        if listener in readable:
            connection, _ = listener.accept()
            if os.fork() == 0:
                listener.close()
                _serve_one(connection, cpu_seconds, memory_mb, pack.call_json)
            connection.close()


#: A call is run as ``call(request, out_of_memory)``; see :func:`proxy.tools.pack.call_json`.
Call = Callable[[bytes, Callable[[], bool]], bytes]


def _serve_one(connection: socket.socket, cpu_seconds: int, memory_mb: int, call: Call) -> None:
    """In the child: never returns."""
    code = 1
    try:
        connection.sendall(HEADER.pack(os.getpid()))
        space = _limit(cpu_seconds, memory_mb)
        size = HEADER.unpack(_read(connection, HEADER.size))[0]
        if size > MAX_REQUEST_BYTES:
            return
        reply = call(_read(connection, size), _peak_within(space, memory_mb // 8))
        connection.sendall(HEADER.pack(len(reply)) + reply)
        code = 0
    finally:
        os._exit(code)


def _limit(cpu_seconds: int, memory_mb: int) -> int:
    """Cap this process's CPU time and address space; the address space cap, in bytes."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    cpu = int(used.ru_utime + used.ru_stime) + cpu_seconds
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    space = _status_bytes("VmSize:") + memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (space, space))
    return space


def _peak_within(space: int, margin_mb: int) -> Callable[[], bool]:
    """Whether the process's peak address space came within ``margin_mb`` of ``space``.

    A computation that grows term by term fails its allocation with the peak at the
    cap (measured: 0.0 MiB below it, for SymPy expanding ``(a+b+c+d+x)**300``); the
    margin leaves room for a last request larger than what was left.
    """
    return lambda: _status_bytes("VmPeak:") >= space - margin_mb * 1024 * 1024


def _status_bytes(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    return 0


def _read(connection: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
