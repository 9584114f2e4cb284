"""Fairness slots per client: behind one master key, two end users (OpenAI's ``user``
field) no longer share one client's slots, so one user's slow calls do not hold the
other's back; virtual keys have slots of their own."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from testing.brain import Brain
from tests.conftest import ServerThread, StartProxy
from tests.orchestrate.conftest import (
    ORCHESTRATE,
    LocalTools,
    http_tool,
    local_tools,
    seed_catalog,
    user,
)
from tests.tenancy.conftest import KEY_A, UPSTREAM_KEY

__all__ = ["local_tools"]


@pytest.fixture
def proxy(local_tools: LocalTools, start_proxy: StartProxy, brain: Brain) -> ServerThread:
    """A master key; one call at a time per client and host; a tool that never answers."""
    seed_catalog([http_tool("legacy_mainframe", "Records from the legacy mainframe",
                            f"{local_tools.url}/hang")])  # fmt: skip
    brain.one_step(
        "Fetch the records from the legacy mainframe", "mainframe", "legacy_mainframe",
        {"label": "records"},
    )  # fmt: skip
    return start_proxy(
        master_key=KEY_A,
        upstream_api_key=UPSTREAM_KEY,
        planner={"policy": "llm", "top_k": 10, "memory_k": 0},
        # a call that outlives every wait here: a slot is only freed by its call's end
        executor={"allow_private_networks": True, "retries": 0, "call_timeout": 3000.0,
                  "deadline": 3000.0, "max_per_client": 1},
        timeouts={"request": 3000.0},
    )  # fmt: skip


def wait_for(condition: Callable[[], bool], seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


@pytest.fixture
def in_background() -> Iterator[Callable[[ServerThread, dict[str, Any]], None]]:
    """Sends orchestrated requests the test leaves running; hangs up on them at its end
    (the proxy then cancels their calls)."""
    sockets: list[socket.socket] = []

    def send(server: ServerThread, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        head = (
            f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n"
            f"authorization: Bearer {KEY_A}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(data)}\r\n\r\n"
        )
        client = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        sockets.append(client)
        client.sendall(head.encode() + data)

    yield send
    for client in sockets:
        client.close()


def test_two_users_behind_one_master_key_get_a_slot_each(
    proxy: ServerThread,
    local_tools: LocalTools,
    in_background: Callable[[ServerThread, dict[str, Any]], None],
) -> None:
    body = {"model": "fake-model", "messages": user("Fetch my records."), **ORCHESTRATE}
    in_background(proxy, {**body, "user": "alice"})
    wait_for(lambda: local_tools.hits["hang"] == 1)  # alice's call holds her slot
    in_background(proxy, {**body, "user": "bob"})
    wait_for(lambda: local_tools.hits["hang"] == 2)  # bob's starts beside it, not after


def test_the_end_users_of_one_key_each_wait_for_their_own_slot(
    proxy: ServerThread,
    local_tools: LocalTools,
    in_background: Callable[[ServerThread, dict[str, Any]], None],
) -> None:
    """The check above can fail: one user's second call waits for its first."""
    body = {"model": "fake-model", "messages": user("Fetch my records."), **ORCHESTRATE}
    in_background(proxy, {**body, "user": "alice"})
    wait_for(lambda: local_tools.hits["hang"] == 1)
    in_background(proxy, {**body, "user": "alice"})
    in_background(proxy, {**body, "user": "bob"})
    wait_for(lambda: local_tools.hits["hang"] == 2)
    busy = (
        proxy.services.orchestrator.pipeline.executor.scheduler.clients_busy
        if proxy.services
        else 0
    )
    assert busy == 2  # alice's slot (one call in it, one waiting) and bob's
    assert local_tools.hits["hang"] == 2
