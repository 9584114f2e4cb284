"""The real small model, loaded once per session and shared by every retriever test."""

from __future__ import annotations

import pytest

from retriever.config import RetrieverConfig
from retriever.embedder import Encoder, load_encoder


@pytest.fixture(scope="session")
def encoder() -> Encoder:
    return load_encoder(RetrieverConfig(device="cpu"))
