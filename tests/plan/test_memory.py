"""The long-term plan memory: concurrent reads and writes, scopes, masking."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest
from qdrant_client import QdrantClient

from proxy.execute.plan import PlanNode
from proxy.execute.scheduler import CallRecord, Outcome, PlanRun
from proxy.plan.memory import PlanMemory
from proxy.plan.model import Plan, SubTask
from retriever.owned_client import OwnedClient

DIM = 16


def succeeded(text: str) -> tuple[Plan, PlanRun]:
    plan = Plan([SubTask(id="s1", text=text)], {"s1": "evaluate_expression"}, "llm")
    run = PlanRun({"s1": CallRecord(PlanNode(id="s1", tool="evaluate_expression"), Outcome.OK)})
    return plan, run


@pytest.fixture
async def memory(tmp_path: Path) -> AsyncIterator[PlanMemory]:
    """A memory in local mode on disk, as the proxy opens it by default."""
    client = OwnedClient(QdrantClient(path=str(tmp_path / "qdrant")))
    memory = PlanMemory(client, "plan_memory", DIM, secrets=["sk-upstream-0123456789"])
    await asyncio.to_thread(memory.create)
    yield memory
    await asyncio.to_thread(client.close)


async def test_concurrent_recalls_and_writes_keep_the_collection_whole(
    memory: PlanMemory,
) -> None:
    # Before every call ran on the client's own thread, the planner's recall (on the
    # event loop) and the background writes (in worker threads) put local mode's
    # arrays out of step within a few hundred of these, for good.
    vectors = np.random.default_rng(0).random((300, DIM)).astype(np.float32)
    gate = asyncio.Semaphore(8)

    async def one(number: int) -> None:
        async with gate:
            await memory.recall([vectors[number]], 3, "client")
            plan, run = succeeded(f"Evaluate 2*pi*50 for case {number}")
            await memory.remember(plan, run, {"s1": vectors[number]}, "client")

    await asyncio.gather(*(one(n) for n in range(len(vectors))))
    assert await memory.count() == len(vectors)
    await memory.probe()
    found = await memory.recall([vectors[7]], 1, "client")
    assert found == {"Evaluate 2*pi*50 for case 7": ["evaluate_expression"]}


async def test_a_client_recalls_only_its_own_paths_and_secrets_are_not_stored(
    memory: PlanMemory,
) -> None:
    vector = np.ones(DIM, dtype=np.float32)
    plan, run = succeeded(
        "Convert 5 EUR with key sk-live-4f9a8b7c6d5e4f3a and sk-upstream-0123456789"
    )
    assert await memory.remember(plan, run, {"s1": vector}, "client-a") == 1
    assert await memory.recall([vector], 3, "client-b") == {}
    assert await memory.recall([vector], 3, "client-a") == {
        "Convert 5 EUR with key *** and ***": ["evaluate_expression"]
    }
