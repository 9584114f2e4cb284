"""The learned adapter: the default loads the bundled file, it ranks tools it was
trained on better than the bare encoder, training is seeded, and a bad file is a clear
error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retriever.adapter import BUNDLED_ADAPTER, AdaptedEncoder, AdapterError, load_adapter
from retriever.bulk import embed_documents
from retriever.config import RetrieverConfig
from retriever.embedder import Encoder, load_encoder
from retriever.finetune.adapter import AdapterSettings, save_adapter, train_adapter
from retriever.finetune.data import EmbeddedSet


def test_the_default_encoder_is_the_bundled_adapter_on_minilm(
    encoder: Encoder, query_precision: str
) -> None:
    assert isinstance(encoder, AdaptedEncoder)
    assert encoder.adapter.digest == load_adapter(BUNDLED_ADAPTER).digest
    assert encoder.adapter.base_model == encoder.base.name
    assert encoder.name.startswith(encoder.base.name + "+adapter-")
    assert BUNDLED_ADAPTER.stat().st_size < 2_000_000
    bare_config = RetrieverConfig(device="cpu", adapter=False, onnx_query_precision=query_precision)
    bare = load_encoder(bare_config)
    assert bare is encoder.base
    text = ["book a table for two tonight"]
    assert np.allclose(encoder.encode(text), encoder.adapter.apply(bare.encode(text)))


def test_another_model_gets_no_bundled_adapter(tmp_path: Path) -> None:
    from retriever.embedder import adapter_path

    assert adapter_path(RetrieverConfig(model_path=tmp_path)) is None
    assert adapter_path(RetrieverConfig()) == BUNDLED_ADAPTER
    assert adapter_path(RetrieverConfig(adapter=False)) is None


# Held in: ToolTalk turns and tools (../shared/data/train/tooltalk, documents as
# retriever.documents writes them) that the bundled adapter was trained on.
QUERY_CALENDAR = (
    "Query Calendar (calendar)\nQuery for events that occur in a time range.\nParameters: "
    "start time (The start time of the meeting, in the pattern of %Y-%m-%d %H:%M:%S); "
    "end time (The end time of the meeting, in the pattern of %Y-%m-%d %H:%M:%S)"
)
CREATE_EVENT = (
    "Create Event (calendar)\nAdds events to a user's calendar.\nParameters: name (The name "
    "of the event.): meeting, event; event type (The type of the event, either 'meeting' or "
    "'event'.)"
)
DELETE_EVENT = (
    "Delete Event (calendar)\nDeletes events from a user's calendar.\nParameters: event id "
    "(The id of the event to be deleted.)"
)
ADD_REMINDER = (
    "Add Reminder (reminder)\nAdd a reminder.\nParameters: task (The task to be reminded "
    "of.); due date (Optional date the task is due, in the format of %Y-%m-%d %H:%M:%S.)"
)
COMPLETE_REMINDER = (
    "Complete Reminder (reminder)\nComplete a reminder.\nParameters: reminder id (The "
    "reminder_id of the reminder to be deleted.)"
)
ADD_ALARM = "Add Alarm (alarm)\nAdds an alarm for a set time.\nParameters: time (The time for alarm. Format: %H:%M:%S)"
HELD_IN = {
    "Thanks! Can you also check my calendar to see if I have any other events today?": (
        QUERY_CALENDAR
    ),
    "Set a reminder to apply sunscreen before lunch at 12:30.": ADD_REMINDER,
}
TOOLS = [QUERY_CALENDAR, CREATE_EVENT, DELETE_EVENT, ADD_REMINDER, COMPLETE_REMINDER, ADD_ALARM]


def test_the_adapter_ranks_held_in_tools_first(encoder: Encoder) -> None:
    assert isinstance(encoder, AdaptedEncoder)
    for query, tool in HELD_IN.items():
        gold = TOOLS.index(tool)
        bare = (encoder.base.encode([query]) @ encoder.base.encode(TOOLS).T)[0]
        adapted = (encoder.encode([query]) @ encoder.encode(TOOLS).T)[0]
        # The bare encoder puts a sibling tool first; the adapter the right one, by more.
        assert int(np.argmax(bare)) != gold
        assert int(np.argmax(adapted)) == gold
        assert _margin(adapted, gold) > _margin(bare, gold)


def _margin(scores: np.ndarray[tuple[int], np.dtype[np.float32]], gold: int) -> float:
    return float(scores[gold] - np.delete(scores, gold).max())


def test_bulk_embedding_maps_the_base_vectors(encoder: Encoder, tmp_path: Path) -> None:
    assert isinstance(encoder, AdaptedEncoder)
    texts = ["send an email to my boss", "weather in Paris"]
    adapted = embed_documents(encoder, texts, cache_dir=tmp_path, progress=False)
    assert np.allclose(adapted, encoder.encode(texts), atol=1e-5)
    # The disk cache holds the base model's vectors, shared with adapter-free runs.
    assert [p.name for p in tmp_path.iterdir()] == ["flag-model-mean.npz"]


def test_a_missing_adapter_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.npz"
    with pytest.raises(AdapterError, match=r"no retrieval adapter at .*nope\.npz"):
        load_encoder(RetrieverConfig(device="cpu", adapter_path=missing))


def test_a_file_that_is_not_an_adapter_is_a_clear_error(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.npz"
    garbage.write_text("not a zip")
    with pytest.raises(AdapterError, match=r"garbage\.npz is not a retrieval adapter"):
        load_adapter(garbage)
    no_matrix = tmp_path / "no_matrix.npz"
    np.savez(no_matrix, weights=np.eye(3))
    with pytest.raises(AdapterError, match="is not a retrieval adapter"):
        load_adapter(no_matrix)


def test_an_adapter_for_another_model_is_refused(tmp_path: Path) -> None:
    wrong_dim = tmp_path / "wide.npz"
    save_adapter(np.eye(768, dtype=np.float32), "flag:model:mean", wrong_dim)
    with pytest.raises(AdapterError, match="maps 768-dimensional vectors"):
        load_encoder(RetrieverConfig(device="cpu", adapter_path=wrong_dim))
    other = tmp_path / "other.npz"
    save_adapter(np.eye(384, dtype=np.float32), "flag:bge-small:cls", other)
    with pytest.raises(AdapterError, match="trained on flag:bge-small:cls"):
        load_encoder(RetrieverConfig(device="cpu", adapter_path=other))


def _toy_set(dim: int = 16, tools: int = 12, per_tool: int = 6) -> EmbeddedSet:
    """Queries that sit near the wrong tool until a rotation is learned."""
    rng = np.random.default_rng(0)
    docs = rng.normal(size=(tools, dim)).astype(np.float32)
    docs /= np.linalg.norm(docs, axis=1, keepdims=True)
    rotation = np.linalg.qr(rng.normal(size=(dim, dim)))[0].astype(np.float32)
    rows = [t for t in range(tools) for _ in range(per_tool)]
    queries = docs[rows] @ rotation + 0.05 * rng.normal(size=(len(rows), dim)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    return EmbeddedSet(
        name="toy",
        doc_ids=[f"t{t}" for t in range(tools)],
        doc_texts=[f"tool {t}" for t in range(tools)],
        doc_keys=[f"t{t}" for t in range(tools)],
        doc_vectors=docs,
        query_ids=[f"q{i}" for i in range(len(rows))],
        query_texts=[f"query {i}" for i in range(len(rows))],
        query_vectors=queries.astype(np.float32),
        positives=[[t] for t in rows],
        negatives=[[(t + 1) % tools] for t in rows],
    )


def test_training_lowers_the_loss_and_is_seeded() -> None:
    data = _toy_set()
    settings = AdapterSettings(epochs=40, learning_rate=1e-2, batch_size=16)
    first = train_adapter([data], settings, progress=False)
    assert first.losses[-1] < first.losses[0] * 0.7
    again = train_adapter([data], settings, progress=False)
    assert np.array_equal(first.matrix, again.matrix)
    low_rank = train_adapter([data], AdapterSettings(rank=4, epochs=2), progress=False)
    assert np.linalg.matrix_rank(low_rank.matrix - np.eye(16), tol=1e-5) <= 4


def test_a_saved_adapter_loads_and_applies(tmp_path: Path) -> None:
    path = tmp_path / "a.npz"
    matrix = 2 * np.eye(4, dtype=np.float32)
    save_adapter(matrix, "flag:model:mean", path)
    adapter = load_adapter(path)
    assert adapter.base_model == "flag:model:mean"
    vectors = np.asarray([[1.0, 0, 0, 0], [0.6, 0.8, 0, 0]], dtype=np.float32)
    assert np.allclose(adapter.apply(vectors), vectors)
