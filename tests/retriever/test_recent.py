"""The memory of recent short calls, on the real all-MiniLM-L6-v2."""

from __future__ import annotations

import numpy as np

from retriever.adapter import AdaptedEncoder
from retriever.embedder import Encoder
from retriever.recent import SHORT_CALL, RecentVectors, remembering


def test_a_text_asked_again_is_not_embedded_again(encoder: Encoder) -> None:
    recent = RecentVectors(encoder)
    first = recent.encode(["convert euros to dollars"])
    before = encoder.counts.texts

    again = recent.encode(["weather in Paris", "convert euros to dollars"])

    assert encoder.counts.texts - before == 1  # only the new text
    assert np.allclose(again[1], first[0], atol=1e-6)
    assert np.allclose(
        again, encoder.encode(["weather in Paris", "convert euros to dollars"]), atol=1e-5
    )


def test_a_returned_row_can_be_changed_without_changing_the_memory(encoder: Encoder) -> None:
    recent = RecentVectors(encoder)
    recent.encode(["send a parcel"])[0][:] = 0.0
    assert np.linalg.norm(recent.encode(["send a parcel"])[0]) > 0.99


def test_long_calls_and_a_full_memory(encoder: Encoder) -> None:
    recent = RecentVectors(encoder, size=2)
    texts = [f"tool number {i} sends a parcel" for i in range(SHORT_CALL + 1)]
    recent.encode(texts)
    before = encoder.counts.texts
    recent.encode(texts)  # a batch of documents is not remembered
    recent.encode(["a", "b", "c"])  # the oldest is forgotten past two
    recent.encode(["c"])
    recent.encode(["a"])
    assert encoder.counts.texts - before == len(texts) + 3 + 1


def test_the_gate_and_the_planner_share_the_base_models_pass(encoder: Encoder) -> None:
    """The planner reads the adapted encoder and the gate the bare model: one question
    costs one forward pass between them."""
    assert isinstance(encoder, AdaptedEncoder)
    planner, gate = remembering(encoder), remembering(encoder.base)
    before = encoder.counts.texts

    planned = planner.encode(["what is 2*pi*51 numerically?"])
    gated = gate.encode(["what is 2*pi*51 numerically?"])

    assert encoder.counts.texts - before == 1
    assert np.allclose(planned, encoder.encode(["what is 2*pi*51 numerically?"]), atol=1e-5)
    assert np.allclose(gated, encoder.base.encode(["what is 2*pi*51 numerically?"]), atol=1e-5)
