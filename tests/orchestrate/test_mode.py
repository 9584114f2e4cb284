"""Orchestrate mode's entry (proxy/orchestrate/service.py, ending.py): a claim a disconnect
cuts short."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from proxy.catalog.service import CatalogService
from proxy.config import Settings, load_settings
from proxy.context import RequestContext
from proxy.encoder.service import EncoderService
from proxy.errors import Conflict
from proxy.execute.service import ToolExecutor
from proxy.kv import Bound, MemoryKeyValue
from proxy.modes import ChatCall
from proxy.orchestrate.idempotency import Claim
from proxy.orchestrate.records import Stores
from proxy.orchestrate.service import Orchestrator
from proxy.protocol.chat import parse_request
from proxy.upstream import ModelRouter, Upstreams
from proxy.upstream.relay import RelayUpstream, make_session
from proxy.upstream.translated import LiteLLMUpstream

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


class ReplyLost(MemoryKeyValue):
    """Keys whose ``add`` is done before its answer comes back, as Redis's may be."""

    def __init__(self) -> None:
        super().__init__(Bound("keys", 100, 1 << 20, evict=False))
        self.added = asyncio.Event()
        self.answer = asyncio.Event()

    async def add(self, key: str, value: bytes, ttl: int, *, tenant: str = "") -> bool:
        stored = await super().add(key, value, ttl, tenant=tenant)
        self.added.set()
        await self.answer.wait()
        return stored


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(data_dir=tmp_path, upstream_base_url="http://127.0.0.1:9")


@pytest.fixture
def keys() -> ReplyLost:
    return ReplyLost()


@pytest.fixture
async def orchestrator(settings: Settings, keys: ReplyLost) -> AsyncIterator[Orchestrator]:
    encoders = EncoderService(settings.retriever)  # loads nothing until asked
    catalog = CatalogService(settings, encoders)
    executor = ToolExecutor(settings.executor)
    relay = RelayUpstream(make_session(settings.timeouts))
    upstreams = Upstreams(relay, LiteLLMUpstream(settings.timeouts.request))
    memory = Bound("records", 100, 1 << 20)
    stores = Stores(traces=MemoryKeyValue(memory), results=MemoryKeyValue(memory), keys=keys)
    orchestrator = Orchestrator(
        settings, catalog, executor, ModelRouter(settings), upstreams, stores
    )
    yield orchestrator
    await orchestrator.drain()
    await executor.aclose()
    await relay.aclose()
    catalog.close()


async def test_a_claim_cut_short_gives_its_key_back(
    orchestrator: Orchestrator, keys: ReplyLost
) -> None:
    request = parse_request(BODY)
    call = ChatCall(request, BODY, b"{}", RequestContext("r1"), idempotency_key="key-1")
    entering = asyncio.create_task(orchestrator.complete(call))
    await keys.added.wait()  # the key is taken; the client goes away before it hears so
    entering.cancel()
    with pytest.raises(asyncio.CancelledError):
        await entering
    keys.answer.set()
    await orchestrator.drain()
    turn = orchestrator.start(request, BODY, RequestContext("r2"))
    assert isinstance(await orchestrator.records.keys.claim("key-1", turn.client, b"{}"), Claim)


async def test_without_the_give_back_the_key_would_stay_running(
    orchestrator: Orchestrator, keys: ReplyLost
) -> None:
    # The same cut on the bare claim: what the mode's shield is there for.
    request = parse_request(BODY)
    turn = orchestrator.start(request, BODY, RequestContext("r1"))
    claiming = asyncio.create_task(orchestrator.records.keys.claim("key-1", turn.client, b"{}"))
    await keys.added.wait()
    claiming.cancel()
    keys.answer.set()
    with pytest.raises(asyncio.CancelledError):
        await claiming
    with pytest.raises(Conflict, match="still running"):
        await orchestrator.records.keys.claim("key-1", turn.client, b"{}")
