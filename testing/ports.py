"""A free TCP port on loopback, for the servers that benchmarks and tests start."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port the kernel just handed out on 127.0.0.1 (free now; a race with another
    process binding it first is possible but needs no retry on these machines)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
