"""The real small model, loaded once per session and shared by every retriever test."""

from __future__ import annotations

import pytest

from retriever.config import RetrieverConfig
from retriever.embedder import Encoder, load_encoder


@pytest.fixture(scope="session")
def encoder(query_precision: str) -> Encoder:
    return load_encoder(RetrieverConfig(device="cpu", onnx_query_precision=query_precision))
