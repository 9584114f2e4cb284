"""The gate's added sources: tool requests of the retrieval sets against their own catalog
and another's, and requests made from templates that need no tool."""

from __future__ import annotations

import json
from pathlib import Path

from retriever.gate.negatives import PER_KIND, template_requests
from retriever.gate.retrieval_rows import RETRIEVAL_SOURCES, retrieval_rows

SWAP = ("send_sms: Send a text message to a phone number.",)


def _write_set(root: Path, name: str, tools: list[str], queries: list[dict[str, object]]) -> None:
    folder = root / name
    (folder / "qrels").mkdir(parents=True)
    corpus = [{"_id": f"{name}-{t}", "name": t, "description": f"{t} for {name}"} for t in tools]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(row) + "\n" for row in corpus))
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    qrels = "".join(f"{q['_id']}\t{name}-{tools[0]}\t1\n" for q in queries)
    (folder / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels)


def test_each_set_gives_its_requests_against_its_catalog_and_against_another(
    tmp_path: Path,
) -> None:
    for name in RETRIEVAL_SOURCES:
        queries: list[dict[str, object]] = [{"_id": f"{name}-q1", "text": f"use {name}"}]
        if name == "sgd":  # a follow-up turn needs its dialogue: not a request of its own
            queries.append({"_id": "sgd-q2", "text": "Yes, book it.", "first_user_turn": False})
        _write_set(tmp_path, name, ["weather", "flights"], queries)

    rows = list(retrieval_rows(tmp_path, [SWAP], seed=13))

    assert {row[1] for row in rows} == set(RETRIEVAL_SOURCES)
    assert not any(row[3] == "Yes, book it." for row in rows)
    for name in RETRIEVAL_SOURCES:
        own, other = [row for row in rows if row[1] == name]
        assert own[2:5] == ("tool_call", f"use {name}", True)
        assert set(own[5]) == {f"weather: weather for {name}", f"flights: flights for {name}"}
        assert other[2:5] == ("other_catalog", f"use {name}", False)
        assert other[5] != own[5]  # any catalog but its own: the swap pool's or another set's
    assert rows == list(retrieval_rows(tmp_path, [SWAP], seed=13))


def test_template_requests_are_seeded_distinct_and_of_every_kind() -> None:
    made = template_requests(seed=13)
    assert made == template_requests(seed=13)
    assert made != template_requests(seed=14)
    kinds = {kind for _, kind, _ in made}
    assert kinds == {"general_knowledge", "writing", "coding", "chitchat", "arithmetic"}
    for kind in kinds:
        texts = [text for _, k, text in made if k == kind]
        assert len(texts) == len(set(texts)) <= PER_KIND
        assert all("{" not in text for text in texts)  # every slot filled
    assert len({id for id, _, _ in made}) == len(made)
