"""The replay benchmark on the planning tests' travel catalog: the traffic goes through the
learner in eighths, every row is scored, and a conflicting tenant beside the first
changes none of its plans."""

from __future__ import annotations

import json
from pathlib import Path

from eval.learning_replay import plot, prepared, replay_set
from eval.plan_data import load_dataset
from proxy.config import Settings
from proxy.learning.store import MemoryLearnedStore
from retriever.config import RetrieverConfig
from retriever.embedder import load_encoder
from tests.plan.conftest import REQUESTS, write_taskbench


async def test_the_replay_scores_before_and_after_and_isolates_tenants(tmp_path: Path) -> None:
    folder = write_taskbench(tmp_path / "travel")
    chains = [r for r in REQUESTS if r["type"] == "chain"]
    rows = [{**r, "id": f"{i}-{r['id']}"} for i, r in enumerate(chains * 4)]
    (folder / "data.json").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    data = load_dataset(folder)
    encoder = load_encoder(RetrieverConfig(device="cpu"))
    catalog = prepared(data, encoder, Settings(), None, progress=False)
    assert (len(catalog.traffic), len(catalog.later)) == (4, 4)
    found = await replay_set([catalog], MemoryLearnedStore(100, 100), 0.5, progress=False)
    assert found["traffic"] == 4
    isolation = found["isolation"]
    assert isinstance(isolation, dict)
    assert isolation["plans_that_differ"] == 0
    assert isolation["tenant_a_alone"] == isolation["tenant_a_beside_b"]
    curve = found["curve"]
    assert isinstance(curve, list)
    assert [point["replayed"] for point in curve] == [0, 0, 1, 1, 2, 2, 3, 3, 4]
    plot({"travel": found}, tmp_path / "curve.png")
    assert (tmp_path / "curve.png").stat().st_size > 0
