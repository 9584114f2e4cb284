"""A toolgraph app served by uvicorn in a thread of this process, for eval scripts."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import uvicorn
from starlette.types import ASGIApp

from testing.ports import free_port


@contextmanager
def serve_in_thread(
    app: ASGIApp, ready_timeout: float = 60, *, wait_loaded: bool = True
) -> Iterator[str]:
    """Serve ``app`` on a free loopback port; yields its base URL once the catalog it
    loads at start-up is loaded (nothing measured pays for it; ``wait_loaded=False``
    for an app that is not a proxy), stops it after."""
    port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, loop="uvloop", http="httptools", ws="none",
        access_log=False, log_config=None, timeout_graceful_shutdown=2,
    )  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="toolgraph", daemon=True)
    thread.start()
    deadline = time.monotonic() + ready_timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise SystemExit("the proxy did not start in time")
        time.sleep(0.05)
    url = f"http://127.0.0.1:{port}"
    if wait_loaded:
        _wait_loaded(url, time.monotonic() + max(ready_timeout, 600))
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(10)


def _wait_loaded(url: str, deadline: float) -> None:
    while httpx.get(f"{url}/readyz", timeout=30).json().get("status") == "loading":
        if time.monotonic() > deadline:
            raise SystemExit("the proxy's catalog did not load in time")
        time.sleep(0.1)
