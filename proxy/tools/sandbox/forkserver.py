"""The sandbox's fork server: ``python -m proxy.tools.sandbox.forkserver SOCKET``.

It imports the tool pack once and runs one call of its own (what SymPy imports or
builds on first use is then inherited, not redone in every child), forks a spare
child, says ``ready`` on stdout, and keeps a spare from then on. A spare runs a call
of its own too, off any request's path, so that the pages a call writes are already
its own (copy-on-write faults: a call took 5.2-6.9 ms in a fresh child, 1.8-2.2 in a
warmed one, at load 5), and waits. It
accepts one connection on the Unix socket, tells the server it was taken, sends its
pid, caps its own CPU time and address space, reads one length-prefixed JSON
request, answers it, tells the server it is done, and exits: every call still runs
in a process of its own that served nothing before. The server forks the next spare
once the call is done, or at once when another connection waits: a fork of this
process costs about 2.4 ms of CPU, which on a busy machine would otherwise compete
with the call it follows. A spare leaves when the server does (its socket to the
server reads as closed), so none outlives it.
An error raised after the child's peak address space reached its cap is reported
as running out of memory, whatever its type (what the child hit, not what the
failing library said).
The server leaves when its stdin closes (the proxy went away). It has one thread,
so forking it is safe.
"""

from __future__ import annotations

import contextlib
import gc
import os
import resource
import select
import signal
import socket
import struct
import sys
from collections.abc import Callable, Container

HEADER = struct.Struct("!Q")
MAX_REQUEST_BYTES = 64 * 1024


def main(argv: list[str]) -> int:
    # Imported here, once, before any fork: the proxy imports this module for its
    # constants only and must not load SymPy for them.
    from proxy.tools.packs.math import pack

    path, cpu_seconds, memory_mb = argv[0], int(argv[1]), int(argv[2])
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(128)
    pack.call_json(WARM_UP)
    # What exists now lives in the permanent generation: a child's collections leave
    # it alone, so they neither scan it nor copy its pages on write.
    gc.freeze()

    def serve(connection: socket.socket, done: Callable[[], None]) -> None:
        _serve_one(connection, cpu_seconds, memory_mb, pack.call_json, done)

    spares = Spares(listener, serve, lambda: pack.call_json(WARM_UP))
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        readable, _, _ = select.select([sys.stdin, *spares.watched()], [], [])
        if sys.stdin in readable and not os.read(sys.stdin.fileno(), 1024):
            return 0
        spares.update(readable)


#: The call the server and each spare run first: a SymPy expression, the path the
#: pack's tools share (parsing, numeric evaluation, the reply's JSON).
WARM_UP = b'{"name": "evaluate_expression", "arguments": {"expression": "2*pi*sqrt(3)"}}'
_TAKEN, _DONE = b"t", b"d"


class Spares:
    """The server's side of its spare: one waits, or one call runs and none waits."""

    def __init__(
        self,
        listener: socket.socket,
        serve: Callable[[socket.socket, Callable[[], None]], None],
        warm: Callable[[], object],
    ) -> None:
        self._listener, self._serve, self._warm = listener, serve, warm
        self._busy: socket.socket | None = None  # the spare that took a call
        self._waiting: socket.socket | None = self._fork()

    def watched(self) -> list[socket.socket]:
        if self._waiting is not None:
            return [self._waiting]
        assert self._busy is not None
        return [self._busy, self._listener]

    def update(self, readable: Container[object]) -> None:
        if self._waiting is not None and self._waiting in readable:
            if self._waiting.recv(1) == _TAKEN:
                self._busy, self._waiting = self._waiting, None
            else:  # it exited unused (killed): replace it
                self._waiting.close()
                self._waiting = self._fork()
        elif self._busy is not None and (self._busy in readable or self._listener in readable):
            # Its call is done (or it exited), or another connection waits meanwhile.
            self._busy.close()
            self._busy, self._waiting = None, self._fork()

    def _fork(self) -> socket.socket:
        """A new spare; the server's end of the socket it reports on."""
        ours, theirs = socket.socketpair()
        if os.fork() == 0:
            ours.close()
            _spare(self._listener, theirs, self._serve, self._warm)
        theirs.close()
        return ours


def _spare(
    listener: socket.socket,
    server: socket.socket,
    serve: Callable[[socket.socket, Callable[[], None]], None],
    warm: Callable[[], object],
) -> None:
    """In a spare: never returns. A connection already waiting is served cold."""
    try:
        if not select.select([listener], [], [], 0)[0]:
            warm()
        readable, _, _ = select.select([listener, server], [], [])
        if server in readable:  # closed: the server exited
            os._exit(0)
        connection, _ = listener.accept()
        listener.close()
        server.sendall(_TAKEN)
    except BaseException:
        os._exit(1)
    serve(connection, lambda: _tell(server, _DONE))


def _tell(server: socket.socket, message: bytes) -> None:
    """A server that went away does not hear it; the call's reply is out already."""
    with contextlib.suppress(OSError):
        server.sendall(message)


#: A call is run as ``call(request, out_of_memory)``; see
#: :func:`proxy.tools.packs.math.pack.call_json`.
Call = Callable[[bytes, Callable[[], bool]], bytes]


def _serve_one(
    connection: socket.socket,
    cpu_seconds: int,
    memory_mb: int,
    call: Call,
    done: Callable[[], None] = lambda: None,
) -> None:
    """In the child: never returns; ``done`` runs once the reply is out."""
    code = 1
    try:
        connection.sendall(HEADER.pack(os.getpid()))
        space = _limit(cpu_seconds, memory_mb)
        size = HEADER.unpack(_read(connection, HEADER.size))[0]
        if size > MAX_REQUEST_BYTES:
            return
        reply = call(_read(connection, size), _peak_within(space, memory_mb // 8))
        connection.sendall(HEADER.pack(len(reply)) + reply)
        done()
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
