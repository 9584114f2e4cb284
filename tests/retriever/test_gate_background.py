"""A catalog's background: how well the bank's requests that need no tool match it, and a
request read against that."""

from __future__ import annotations

import numpy as np
import pytest

from retriever.config import RetrieverConfig
from retriever.embedder import Encoder, Vectors, load_encoder
from retriever.gate import background
from retriever.gate.background import (
    BANK_VECTORS,
    COVERAGE,
    Background,
    BankVectors,
    bank_texts,
    read_shipped,
)
from retriever.gate.catalog import CatalogMemory
from retriever.gate.features import SCALARS, CatalogView, batch_scalar_features, scalar_features
from retriever.gate.model import gate_encoder_config


def unit(rows: np.ndarray) -> Vectors:
    vectors: Vectors = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)
    return vectors


def test_a_request_is_read_against_the_banks_best_cosines() -> None:
    bank = unit(np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 1.0]]))
    catalog = unit(np.array([[1.0, 0.0, 0.0], [1.0, 1.0, 0.0]]))
    found = Background.of(bank, catalog)
    # Best cosines: 1.0, 0.707, 1.0 and 0.0.
    assert np.allclose(found.best, [0.0, np.sqrt(0.5), 1.0, 1.0])
    assert found.features(0.8)[1] == 0.5  # beats two of the four
    assert found.features(0.0)[1] == 0.0  # beats none (a tie is not a win)
    low, high = found.features(0.2)[0], found.features(0.9)[0]
    assert low < 0 < high
    assert np.isclose(high, (0.9 - found.best.mean()) / found.std)


def test_a_big_catalog_is_scored_in_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(0)
    bank, catalog = unit(rng.normal(size=(20, 8))), unit(rng.normal(size=(11, 8)))
    whole = Background.of(bank, catalog)
    monkeypatch.setattr(background, "ROWS", 3)
    assert np.array_equal(Background.of(bank, catalog).best, whole.best)


def test_a_coverage_gate_reads_the_scalars_after_the_others() -> None:
    rng = np.random.default_rng(1)
    tools = unit(rng.normal(size=(5, 8)))
    query = unit(rng.normal(size=(1, 8)))[0]
    documents = [f"tool_{i}: does thing {i}" for i in range(5)]
    plain = CatalogView.of(tools, documents)
    with pytest.raises(ValueError, match="background"):
        scalar_features(query, "do thing 2", plain, coverage=True)
    read = CatalogView.of(tools, documents, unit(rng.normal(size=(30, 8))))
    scalars = scalar_features(query, "do thing 2", read, coverage=True)
    assert len(scalars) == len(SCALARS) + len(COVERAGE)
    assert np.array_equal(scalars[: len(SCALARS)], scalar_features(query, "do thing 2", plain))
    assert read.background is not None
    assert tuple(scalars[len(SCALARS) :]) == read.background.features(float(scalars[0]))


class Other:
    """An encoder the shipped bank was not embedded with."""

    name = "flag:other-model:mean"
    dim = 4

    def __init__(self) -> None:
        self.calls = 0

    def encode(self, texts: list[str]) -> Vectors:
        self.calls += 1
        return unit(np.ones((len(texts), self.dim)))


def test_another_encoder_embeds_the_bank_once() -> None:
    bank = BankVectors()
    other = Other()
    first = bank.of(other)  # type: ignore[arg-type]
    assert first.shape == (len(bank_texts()), Other.dim)
    calls = other.calls
    assert bank.of(other) is first  # type: ignore[arg-type]
    assert other.calls == calls


@pytest.fixture(scope="module")
def encoder() -> Encoder:
    return load_encoder(gate_encoder_config(RetrieverConfig(device="cpu")))


def test_the_shipped_bank_is_its_texts_as_the_gates_encoder_reads_them(encoder: Encoder) -> None:
    """bank.npz is bank.txt embedded by the encoder it names (rewrite it with ``python -m
    retriever.gate --bank`` after changing either)."""
    shipped = read_shipped(BANK_VECTORS)
    assert shipped is not None
    name, texts, vectors = shipped
    assert (name, texts) == (encoder.name, bank_texts())
    assert 200 <= len(texts) == len(set(texts))
    assert BANK_VECTORS.stat().st_size < 150_000
    fresh = encoder.encode(texts[:40])
    # each text's own vector is its nearest in the bank, and close to it: int8 query
    # kernels differ by CPU (0.971 at worst on an AVX2 CPU for vectors made on a VNNI one)
    similar = fresh @ vectors.T
    assert list(np.argmax(similar, axis=1)) == list(range(40))
    assert np.min(np.diag(similar[:, :40])) > 0.95


@pytest.mark.parametrize("tools", [1, 2, 7])
def test_the_banks_scalars_are_each_requests_own(tools: int) -> None:
    """The bank is scored against a catalog in one pass (batch_scalar_features): the same
    scalars as one request at a time, word shares and all."""
    rng = np.random.default_rng(tools)
    documents = [f"get_{w}_{i}: find the {w} for a city on a date" for i, w in
                 zip(range(tools), ["weather", "hotel", "flight", "news", "stock", "bus", "tide"], strict=False)]  # fmt: skip
    texts = ["weather in Oslo", "Hello there", "book a hotel and a flight for 2 people", "", "the"]
    view = CatalogView.of(
        unit(rng.normal(size=(tools, 8))), documents, unit(rng.normal(size=(9, 8)))
    )
    queries = unit(rng.normal(size=(len(texts), 8)))
    batch = batch_scalar_features(queries, texts, view, coverage=True)
    one = np.stack(
        [scalar_features(q, t, view, coverage=True) for q, t in zip(queries, texts, strict=True)]
    )
    assert np.allclose(batch, one, atol=1e-6)


def test_select_modes_memory_keeps_the_lists_sent_lately() -> None:
    memory = CatalogMemory(size=2)
    memory.put(("a",), (None, 0.1))
    memory.put(("b",), (None, 0.2))
    assert memory.get(("a",)) == (None, 0.1)  # now the newest
    memory.put(("c",), (None, 0.3))
    assert memory.get(("b",)) is None
    assert memory.get(("a",)) == (None, 0.1)
    assert memory.get(("c",)) == (None, 0.3)
