"""The app's embedding model is loaded once, and select mode and the catalog both take
it from the encoder service: select embeds through its batcher, the catalog indexes
with its model."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from proxy.catalog.service import CatalogService
from proxy.config import load_settings
from proxy.context import RequestContext
from proxy.encoder.service import EncoderService, RetrieverUnavailable
from proxy.protocol.chat import parse_request
from proxy.select.service import SelectService
from retriever.errors import ModelNotFound
from tests.retriever.client_tools import client_tools


async def test_select_mode_and_the_catalog_share_one_loaded_model(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path, planner={"memory_k": 0})
    encoders = EncoderService(settings.retriever)
    select = SelectService(settings.retriever, encoders)
    catalog = CatalogService(settings, encoders)
    try:
        first, second = await asyncio.gather(encoders.start(), encoders.start())
        assert first is second  # one load, however many ask at once
        assert encoders.batching(first.encoder) is first

        misses = first.stats.cache_misses
        request = {
            "model": "m",
            "messages": [{"role": "user", "content": "book a flight to Rome"}],
            "tools": client_tools()[:10],
            "toolgraph": {"mode": "select", "top_k": 3},
        }
        body = await select.rewrite(parse_request(request), request, RequestContext("test"))
        assert 0 < len(body["tools"]) <= 3
        assert first.stats.cache_misses > misses  # select embedded through the batcher

        texts = first.encoder.counts.texts
        await catalog.get()  # a fresh data folder: the catalog's tools are embedded
        assert first.encoder.counts.texts > texts  # by the same model
    finally:
        await catalog.aclose()
        encoders.close()


async def test_a_missing_model_is_unavailable_naming_what_needed_it(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path, retriever={"model_path": str(tmp_path / "none")})
    encoders = EncoderService(settings.retriever)
    with pytest.raises(ModelNotFound):  # at start-up: it stops the process
        await encoders.start()
    with pytest.raises(RetrieverUnavailable, match=r"^select mode is unavailable"):
        await encoders.embedder("select mode")  # for a request: a 503 it can read
