"""``toolgraph index build``, ``toolgraph search`` and ``toolgraph eval retrieval``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.retrieval import evaluate, load_beir
from graph_store.store import open_store
from proxy.cli import main
from proxy.config import load_settings
from proxy.tools.packs.math.catalog import builtin_tools
from retriever.config import RetrieverConfig
from retriever.embedder import Encoder
from retriever.metrics import ndcg_at, recall_at
from tests.conftest import ONNX_DIR
from tests.retriever.catalog import _TOOLS, catalog_tools

QUERIES = {
    "G1:1": ("will it rain in Oslo this weekend", "get_weather_forecast"),
    "G1:2": ("book me a room in a hotel in Rome", "book_hotel"),
    "G2:3": ("how much is 100 yen in pounds", "convert_currency"),
    "G2:4": ("decode this VIN for me", "vin_decoder"),
}


@pytest.fixture
def beir(tmp_path: Path) -> Path:
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    rows = [
        {"_id": name, "title": name, "text": description} for name, _, _, description, _ in _TOOLS
    ]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": qid, "text": text}) + "\n" for qid, (text, _) in QUERIES.items())
        + json.dumps({"_id": "G9:unjudged", "text": "no qrels"})
        + "\n"
    )
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n"
        + "".join(f"{qid}\t{tool}\t1\n" for qid, (_, tool) in QUERIES.items())
    )
    return folder


def test_metrics_on_known_rankings() -> None:
    relevant = {"a": 1, "b": 1}
    assert recall_at(["a", "x", "b"], relevant, 2) == 0.5
    assert ndcg_at(["a", "b"], relevant, 2) == 1.0
    # one hit at rank 2 of 2 relevant: (1/log2 3) / (1 + 1/log2 3)
    assert ndcg_at(["x", "a"], relevant, 2) == pytest.approx(0.6309 / 1.6309, abs=1e-4)


def test_the_beir_loader_keeps_judged_queries_and_groups_by_prefix(beir: Path) -> None:
    data = load_beir(beir)
    assert [q.id for q in data.queries] == list(QUERIES)
    assert {q.group for q in data.queries} == {"G1", "G2"}
    assert data.qrels["G2:4"] == {"vin_decoder": 1}


def test_eval_retrieval_reports_every_method_and_group(
    beir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "scores.json"
    code = main(
        ["eval", "retrieval", "--corpus", str(beir), "--k", "1,3", "--json", str(out), "--quiet"]
    )
    assert code == 0
    scores = json.loads(out.read_text())
    assert set(scores) == {
        "bm25",
        "dense-minilm-adapter-enriched",
        "hybrid-minilm-adapter-enriched",
        "dense-minilm-adapter-name_description",
        "hybrid-minilm-adapter-name_description",
    }
    assert scores["dense-minilm-adapter-enriched"]["recall@3"] == 100.0
    assert scores["dense-minilm-adapter-enriched"]["ndcg@1"] == 100.0
    assert scores["bm25"]["recall@3"] < 100.0  # "yen in pounds" shares no word with its tool
    assert set(scores["bm25"]["by_group"]) == {"G1", "G2"}
    report = capsys.readouterr().out
    assert "4 queries, 10 documents" in report
    assert "G2" in report


def test_eval_retrieval_builds_its_index_from_the_retriever_settings(
    beir: Path, encoder: Encoder
) -> None:
    # Without BM25 in the index (retriever.fusion false) the hybrid search is the dense
    # one: the evaluation searches the index the proxy would build from these settings.
    data = load_beir(beir)
    alone = evaluate(
        data,
        encoder,
        [1, 3],
        variants=["enriched"],
        progress=False,
        config=RetrieverConfig(fusion=False),
    )
    fused = evaluate(
        data,
        encoder,
        [1, 3],
        variants=["enriched"],
        progress=False,
        config=RetrieverConfig(fusion_method="rrf", dense_weight=0.0),
    )
    model = "minilm-adapter" if "+adapter" in encoder.name else "minilm"
    assert alone[f"hybrid-{model}-enriched"] == alone[f"dense-{model}-enriched"]
    # All weight on BM25's ranking: the hybrid follows BM25 where it found anything.
    assert fused[f"hybrid-{model}-enriched"]["all"]["recall@3"] < 100.0


def test_eval_retrieval_refuses_bad_cut_offs(beir: Path) -> None:
    assert main(["eval", "retrieval", "--corpus", str(beir), "--k", "0,x"]) == 2
    assert main(["eval", "retrieval", "--corpus", str(beir / "missing")]) == 2


def test_index_build_then_search(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = load_settings()
    store = open_store(settings.data_dir, settings.neo4j_uri)
    store.upsert_tools(catalog_tools())
    store.close()
    served = 10 + len(builtin_tools())  # the built-in pack is in the catalog the proxy serves
    assert main(["index", "build", "--quiet"]) == 0
    assert f"{served} added, 0 re-embedded, 0 removed, 0 unchanged" in capsys.readouterr().out
    assert main(["index", "build", "--quiet"]) == 0
    assert f"0 added, 0 re-embedded, 0 removed, {served} unchanged" in capsys.readouterr().out
    assert main(["search", "send a text message to my phone", "-k", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert "send_sms" in lines[0]
    assert main(["search", "weather", "--category", "finance", "-k", "5"]) == 0
    assert all("[finance /" in line for line in capsys.readouterr().out.splitlines())


def test_search_before_build_says_what_to_do(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", "anything"]) == 2
    assert "toolgraph index build" in capsys.readouterr().err


def test_eval_retrieval_stages_report_expansion_and_the_reranker(
    beir: Path, encoder: Encoder
) -> None:
    data = load_beir(beir)
    config = RetrieverConfig(onnx_dir=ONNX_DIR)
    plain = evaluate(data, encoder, [1, 3], variants=["enriched"], progress=False, config=config)
    staged = evaluate(
        data, encoder, [1, 3], variants=["enriched"], progress=False, config=config, stages=True
    )
    model = "minilm-adapter" if "+adapter" in encoder.name else "minilm"
    first = f"hybrid-{model}-enriched"
    assert set(staged) == {*plain, f"{first}+expansion", f"{first}+rerank"}
    assert staged[f"{first}+rerank"]["all"]["recall@3"] >= 75.0
    assert staged[f"{first}+expansion"]["all"]["recall@3"] >= 75.0
