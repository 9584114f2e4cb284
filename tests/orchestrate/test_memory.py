"""Orchestrate mode's long-term plan memory through the API: scoped to the client,
masked on disk, and a store that no longer works taken out of readiness."""

from __future__ import annotations

import os
import pickle
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import openai
from fastapi import FastAPI
from qdrant_client import QdrantClient

from proxy.services import AppServices
from testing.brain import Brain
from tests.conftest import ServerThread, StartProxy
from tests.orchestrate.conftest import ORCHESTRATE, trace, user

SECRET = "sk-live-4f9a8b7c6d5e4f3a2b1c"


def orchestrate(server: ServerThread, key: str, text: str) -> str:
    """One orchestrated request with the client key ``key``; its trace id."""
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key=key, max_retries=0) as client:
        raw = client.chat.completions.with_raw_response.create(
            model="fake-model", messages=user(text), extra_body=ORCHESTRATE
        )
    return raw.headers["x-toolgraph-trace-id"]


def stored_payloads() -> list[dict[str, Any]]:
    """The memory's points as local mode keeps them on disk (read-only)."""
    path = Path(os.environ["TOOLGRAPH_DATA_DIR"]) / "qdrant/collection/plan_memory"
    if not (path / "storage.sqlite").exists():
        return []
    with closing(sqlite3.connect(f"file:{path / 'storage.sqlite'}?mode=ro", uri=True)) as db:
        rows = db.execute("SELECT point FROM points").fetchall()
    return [pickle.loads(row[0]).payload for row in rows]  # our own test data


def wait_for_payloads(count: int) -> list[dict[str, Any]]:
    """The memory is written in the background: wait (bounded) until it holds ``count``."""
    deadline = time.monotonic() + 60
    while len(payloads := stored_payloads()) < count:
        assert time.monotonic() < deadline, f"the memory holds {len(payloads)} of {count}"
        time.sleep(0.05)
    return payloads


def pick_prompts(brain: Brain) -> list[str]:
    return [text for stage, text in brain.prompts if stage == "pick"]


def test_one_clients_words_never_reach_another_clients_prompts(
    start_proxy: StartProxy, brain: Brain
) -> None:
    server = start_proxy(planner={"policy": "llm", "top_k": 10, "memory_k": 3})
    brain.one_step(
        f"Evaluate 2*pi*50 for the account with key {SECRET}",
        "2*pi*50",
        "evaluate_expression",
        {"expression": "2*pi*50"},
    )
    orchestrate(server, "sk-client-a-0123456789", f"My key is {SECRET}: compute 2*pi*50")
    (payload,) = wait_for_payloads(1)
    assert SECRET not in str(payload)
    assert "sk-client-a" not in str(payload)  # the scope is a hash of the key
    disk = Path(os.environ["TOOLGRAPH_DATA_DIR"]) / "qdrant"
    assert all(SECRET.encode() not in f.read_bytes() for f in disk.rglob("*") if f.is_file())

    brain.prompts.clear()
    brain.one_step("Evaluate 2*pi*50 for my account", "2*pi*50", "evaluate_expression", {})
    orchestrate(server, "sk-client-b-0123456789", "Compute 2*pi*50 for my account")
    # the call finds no arguments, so the plan backtracks: every pick prompt is checked
    prompts = pick_prompts(brain)
    assert prompts
    assert not any("A past success" in prompt for prompt in prompts)
    assert not any("account with key" in prompt for prompt in prompts)

    brain.prompts.clear()  # the same client does see its own, masked
    orchestrate(server, "sk-client-a-0123456789", "Compute 2*pi*50 for my account")
    first = pick_prompts(brain)[0]
    assert 'A past success: "Evaluate 2*pi*50 for the account with key ***"' in first


def break_plan_memory(app: FastAPI) -> None:
    """Put local mode's arrays out of step, as concurrent access from two threads did."""

    def corrupt(client: QdrantClient) -> None:
        collection = client._client.collections["plan_memory"]
        collection.deleted = np.append(collection.deleted, False)

    services: AppServices = app.state.services
    vectors = services.orchestrator.catalog._vectors  # the Qdrant client the first load opened
    assert vectors is not None
    vectors.client.call(corrupt)


def test_readiness_reports_a_plan_memory_that_no_longer_works(
    start_proxy: StartProxy, brain: Brain
) -> None:
    server = start_proxy(planner={"policy": "llm", "top_k": 10, "memory_k": 3})
    # Two points: arrays of one broadcast against any length, so one could not break.
    for step in ("Evaluate 2*pi*50", "Evaluate 2*pi*50 once more"):
        brain.one_step(step, "2*pi*50", "evaluate_expression", {"expression": "2*pi*50"})
        orchestrate(server, "sk-client", "Compute 2*pi*50")
    wait_for_payloads(2)
    ready = httpx.get(f"{server.url}/readyz", timeout=10)
    assert ready.status_code == 200
    assert ready.json()["checks"]["catalog"] == "ok"

    app = server.server.config.app
    assert isinstance(app, FastAPI)
    break_plan_memory(app)
    broken = httpx.get(f"{server.url}/readyz", timeout=10)
    assert broken.status_code == 503
    assert broken.json()["checks"]["catalog"] == "failed: VectorStoreError"
    assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200
    # Requests still routed here are answered, planned without the memory's examples.
    notes = trace(server, orchestrate(server, "sk-client", "Compute 2*pi*50"))["plan"]["notes"]
    assert any(note.startswith("no memory examples: Qdrant failed") for note in notes)
