"""The held-out select-mode recall's request lists (no model, no data folder)."""

from __future__ import annotations

import numpy as np

from eval.select_recall import tool_list
from retriever.finetune.data import EmbeddedSet


def embedded(keys: list[str], positives: list[list[int]]) -> EmbeddedSet:
    size = len(keys)
    return EmbeddedSet(
        name="toy",
        doc_ids=[f"t{i}" for i in range(size)],
        doc_texts=[f"tool {i}" for i in range(size)],
        doc_keys=keys,
        doc_vectors=np.zeros((size, 4), dtype=np.float32),
        query_ids=[f"q{i}" for i in range(len(positives))],
        query_texts=["ask"] * len(positives),
        query_vectors=np.zeros((len(positives), 4), dtype=np.float32),
        positives=positives,
        negatives=[[] for _ in positives],
    )


def test_a_list_holds_the_relevant_tools_and_no_twin_of_them() -> None:
    keys = [f"k{i}" for i in range(40)]
    keys[7] = keys[3]  # tool 7 does what tool 3 does: never a distractor of a query on 3
    data = embedded(keys, [[3, 5]])
    listed = tool_list(data, 0, 10)
    assert len(listed) == len(set(listed)) == 10
    assert {3, 5} <= set(listed)
    assert 7 not in listed
    assert tool_list(data, 0, 10) == listed  # seeded: the same list each run
    assert sorted(tool_list(data, 0, 500)) == [i for i in range(40) if i != 7]
