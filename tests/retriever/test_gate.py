"""The shipped no-tool gate: it loads offline, refuses what it cannot read, decides the
obvious cases, and its training is seeded."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from proxy.tools.catalog import builtin_tools
from retriever.config import RetrieverConfig
from retriever.documents import tool_fields
from retriever.embedder import Encoder, load_encoder
from retriever.errors import ModelNotFound
from retriever.gate.catalog import CatalogGate
from retriever.gate.features import SCALARS, gate_document
from retriever.gate.model import WEIGHTS, gate_encoder_config, load_gate
from retriever.gate.train import RECALL_TARGET, Design, Options, choose_recall_threshold, fit


@pytest.fixture(scope="module")
def encoder() -> Encoder:
    return load_encoder(gate_encoder_config(RetrieverConfig(device="cpu")))


@pytest.fixture(scope="module")
def builtin(encoder: Encoder) -> CatalogGate:
    documents = [gate_document(tool_fields(tool)) for tool in builtin_tools()]
    return CatalogGate(load_gate(), encoder, documents)


def test_the_shipped_weights_load_and_name_their_encoder(encoder: Encoder) -> None:
    gate = load_gate()
    assert gate.encoder == encoder.name
    assert 0 < gate.threshold < 1
    assert WEIGHTS.stat().st_size < 200_000


@pytest.mark.parametrize(
    "text", ["{", '{"encoder": "x"}', '{"encoder": "x", "scalars": [], "mean": []}']
)
def test_unreadable_weights_are_model_not_found(tmp_path: Path, text: str) -> None:
    path = tmp_path / "weights.json"
    path.write_text(text)
    with pytest.raises(ModelNotFound, match="cannot read the gate's weights"):
        load_gate(path)


def test_weights_of_another_encoder_are_refused(encoder: Encoder) -> None:
    spec = load_gate().spec.model_copy(update={"encoder": "flag:other-model:cls"})
    from retriever.gate.model import Gate

    with pytest.raises(ModelNotFound, match="other-model"):
        CatalogGate(Gate(spec), encoder, ["add two numbers"])


@pytest.mark.parametrize(
    "text",
    ["Thanks, that helps a lot!", "Hi there, how are you?", "Who wrote Pride and Prejudice?"],
)
def test_requests_no_built_in_tool_serves(builtin: CatalogGate, text: str) -> None:
    decision = builtin.decide(text)
    assert not decision.needs_tool
    assert decision.label == "no_tool"


@pytest.mark.parametrize(
    "text", ["Integrate x^2 from 0 to 3", "What is the derivative of sin(x)*x?"]
)
def test_requests_a_built_in_tool_serves(builtin: CatalogGate, text: str) -> None:
    decision = builtin.decide(text)
    assert decision.needs_tool
    assert decision.label == "tool"


def test_an_empty_catalog_serves_nothing(encoder: Encoder) -> None:
    decision = CatalogGate(load_gate(), encoder, []).decide("Integrate x^2 from 0 to 3")
    assert (decision.needs_tool, decision.score) == (False, 0.0)


def test_training_is_seeded() -> None:
    rng = np.random.default_rng(0)
    rows = 40
    data = Design(
        scalars=rng.normal(size=(rows, len(SCALARS))),
        queries=rng.normal(size=(rows, 8)),
        labels=rng.random(rows) > 0.5,
        sources=np.array(["a", "b"] * (rows // 2)),
        has_catalog=np.ones(rows, dtype=bool),
        categories=np.array(["c"] * rows),
    )
    options = Options(hidden=4, steps=20)
    first = fit(data, options, "enc", ["a", "b"]).spec
    assert fit(data, options, "enc", ["a", "b"]).spec == first
    assert fit(data, Options(hidden=4, steps=20, seed=1), "enc", ["a", "b"]).spec != first


def test_a_gate_without_the_query_vector_ignores_it() -> None:
    rng = np.random.default_rng(0)
    rows = 40
    data = Design(
        scalars=rng.normal(size=(rows, len(SCALARS))),
        queries=rng.normal(size=(rows, 8)),
        labels=rng.random(rows) > 0.5,
        sources=np.array(["a", "b"] * (rows // 2)),
        has_catalog=np.ones(rows, dtype=bool),
        categories=np.array(["c"] * rows),
    )
    gate = fit(data, Options(steps=20, query_vector=False), "enc", ["a", "b"])
    weight = np.asarray(gate.spec.layers[0].weight)
    assert not weight[len(SCALARS) :].any()
    assert weight[: len(SCALARS)].any()
    other = rng.normal(size=data.queries.shape)
    assert np.array_equal(
        gate.probability(data.scalars, data.queries), gate.probability(data.scalars, other)
    )


def test_the_cautious_threshold_keeps_the_requests_needing_a_tool() -> None:
    labels = np.array([True] * 50 + [False] * 50)
    probability = np.concatenate([np.linspace(0.2, 1.0, 50), np.linspace(0.0, 0.5, 50)])
    data = Design(
        scalars=np.zeros((100, len(SCALARS))),
        queries=np.zeros((100, 8)),
        labels=labels,
        sources=np.array(["a"] * 100),
        has_catalog=np.ones(100, dtype=bool),
        categories=np.array(["c"] * 100),
    )
    threshold = choose_recall_threshold(probability, data)
    assert np.mean(probability[labels] >= threshold) >= RECALL_TARGET
    assert np.mean(probability[labels] >= threshold + 0.01) < RECALL_TARGET
