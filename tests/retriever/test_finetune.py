"""A tiny CPU fine-tuning run: the loss goes down and the saved model loads."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retriever.config import RetrieverConfig
from retriever.embedder import Encoder, bundled_model_path, load_encoder
from retriever.finetune.train import Example, batch_targets, mine_hard_negatives, train
from tests.retriever.catalog import catalog_tools

# Queries worded away from their tools' documents, so there is something to learn.
PAIRS = {
    "is it going to pour on my picnic": "get_weather_forecast",
    "how dirty is the air downtown": "get_air_quality",
    "plane tickets to Tokyo": "search_flights",
    "somewhere to sleep in Rome": "book_hotel",
    "how many yen for my dollars": "convert_currency",
    "what is AAPL trading at": "get_stock_price",
    "write to my boss": "send_email",
    "ping my mom on her phone": "send_sms",
}


@pytest.mark.timeout(900)  # 20 s on a quiet machine; 216-666 s were seen at load 13-21
def test_training_lowers_the_loss_and_saves_a_loadable_model(
    encoder: Encoder, tmp_path: Path
) -> None:
    documents = {tool.name: f"{tool.name}: {tool.description}" for tool in catalog_tools()}
    examples = [Example(query, documents[name]) for query, name in PAIRS.items()]
    mined = mine_hard_negatives(encoder, examples, list(documents.values()), per_query=2)
    assert all(len(e.negatives) == 2 and e.positive not in e.negatives for e in mined)

    report = train(
        mined,
        bundled_model_path(),
        tmp_path / "tuned",
        epochs=9,
        learning_rate=1e-4,
        batch_size=8,
        max_steps=6,  # nine epochs of one batch, stopped after six
    )
    assert report.steps == 6
    assert report.losses[-1] < report.losses[0] * 0.9

    # torch: this test is about training; exporting the new weights to ONNX is not.
    tuned = load_encoder(
        RetrieverConfig(model_path=tmp_path / "tuned", device="cpu", runtime="torch")
    )
    assert tuned is not encoder
    queries = tuned.encode(list(PAIRS))
    docs = tuned.encode([documents[name] for name in PAIRS.values()])
    before = encoder.encode(list(PAIRS)) @ encoder.encode([documents[n] for n in PAIRS.values()]).T
    after = queries @ docs.T
    # Each query is nearer its own tool than before, relative to the other tools.
    margin = lambda s: float(np.mean(np.diag(s) - s.mean(axis=1)))  # noqa: E731
    assert margin(after) > margin(before)


def test_a_tool_brought_twice_is_scored_once_and_is_relevant_to_every_query_needing_it() -> None:
    batch = [
        Example("rain tomorrow?", "weather", ("air",)),
        Example("will it snow", "weather", ("flights",)),
        Example("weather and smog", "weather", ("flights",)),
        Example("weather and smog", "air", ("weather",)),
    ]
    documents, relevant = batch_targets(batch)
    assert documents == ["weather", "air", "flights"]
    assert relevant == [
        [True, False, False],
        [True, False, False],
        [True, True, False],  # both tools of a two-tool query are positives, never negatives
        [True, True, False],
    ]


def test_a_mined_negative_is_relevant_to_none_of_its_querys_examples(encoder: Encoder) -> None:
    documents = {tool.name: f"{tool.name}: {tool.description}" for tool in catalog_tools()}
    query = "will it rain and how dirty is the air"
    needed = {documents["get_weather_forecast"], documents["get_air_quality"]}
    examples = [Example(query, doc) for doc in sorted(needed)]
    # Every other tool as a negative: the two the query needs must be in none of the lists.
    mined = mine_hard_negatives(encoder, examples, list(documents.values()), per_query=100)
    for example in mined:
        assert len(example.negatives) == len(documents) - 2
        assert not needed & set(example.negatives)
