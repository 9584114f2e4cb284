"""``python -m eval.gate_heldout``: rows the shipped gate never trained on, with CLINC's
catalog."""

from __future__ import annotations

import json
from pathlib import Path

from eval.gate_heldout import main
from retriever.gate.data import SAMPLE, _source_rows
from retriever.gate.train import Options


def make_train(root: Path, extra: int) -> None:
    """A train/ folder whose CLINC150 and NQ-open files hold ``extra`` rows more than the
    gate's samples."""
    gate = root / "gate"
    gate.mkdir(parents=True)
    for source, needs in (("clinc150", True), ("nq_open", False)):
        rows = [
            {"id": f"{source}_{i}", "query": f"{source} question {i}", "needs_tool": needs,
             "category": "in_scope" if needs else "general_knowledge"}
            for i in range(SAMPLE[source] + extra)
        ]  # fmt: skip
        (gate / f"{source}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    intents = [
        {"name": "book_flight", "domain": "travel"},
        {"name": "greeting", "domain": "small_talk"},
    ]
    (gate / "clinc150_intents.json").write_text(json.dumps({"intents": intents}))


def test_it_draws_only_rows_outside_the_gates_training_sample(tmp_path: Path) -> None:
    make_train(tmp_path / "train", extra=5)
    out = tmp_path / "out"
    assert main(["--data", str(tmp_path / "train"), "--out", str(out),
                 "--clinc", "5", "--nq-open", "5"]) == 0  # fmt: skip
    drawn = {json.loads(line)["query"] for line in (out / "data.jsonl").read_text().splitlines()}
    trained = {
        row["query"]
        for source in ("clinc150", "nq_open")
        for row in _source_rows(tmp_path / "train", source, SAMPLE, Options.seed)
    }
    assert len(drawn) == 10
    assert not drawn & trained
    tools = json.loads((out / "tools.json").read_text())
    assert tools == [{"name": "book_flight", "description": "book flight (travel)"}]
