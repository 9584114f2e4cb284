"""Retrieval by stage on data nothing in the row was fitted on: docs/benchmarks.md's table.

Rows: each of the eight training sets left out (its first stage's adapter trained on
the other seven, :func:`eval.retrieval_folds.fold_matrix`), then toolbench_stable and
Seal-Tools (unseen: the shipped adapter; every relevant tool of the sampled queries
plus a seeded sample of the others). Columns: BM25, the first stage (what ships), the
first stage with each tool's template questions as extra rows, and the shipped
late-interaction reranker over the first stage's top 30 (trained on six of the
training sets, ``retriever.finetune.late.HELD_OUT`` are the two it never read).

Each set's queries are also searched under a grid of fusion weights and BM25 settings;
``--choose`` picks, for every row, the grid point with the best mean NDCG@5 over the
*other* training sets (nested leave-one-out), so no row's figure chose its own setting.

Per stage, the time a query spends in it (p50 over the set's queries, one at a time,
the encoder on ``cpu_threads``) is kept beside the scores::

    python -m eval.seal_beir $EVAL_DATA/extras/seal_tools .cache/retriever/seal_beir
    nice -n 10 python -m eval.retrieval_table --json eval/results/retrieval_table.json
    python -m eval.retrieval_table --plot docs/retrieval_table.png
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from eval.data_folder import dataset, unseen_sets
from eval.gate import BadInput, read_weights
from eval.retrieval import _encode_queries
from eval.retrieval_folds import fold_matrix
from eval.retrieval_rerank import Set, metrics, unseen_set
from retriever.adapter import AdaptedEncoder, Adapter
from retriever.bulk import embed_documents
from retriever.config import GateWeightsName, RetrieverConfig
from retriever.documents import corpus_fields, make_document
from retriever.embedder import Encoder, bundled_model_path, load_encoder
from retriever.expansion import questions
from retriever.finetune.data import TRAIN_SETS, _json_lines, load_set, read_set
from retriever.finetune.late import HELD_OUT
from retriever.index import RERANK_DEPTH, ExtraRows, ToolIndex
from retriever.metrics import ndcg_at
from retriever.rerank.reranker import Reranker, maxsim
from retriever.rerank.weights import load_weights

#: Fusion weights (dense share of ``fusion_method: scores``) and BM25 (k1, b) searched.
DENSE_WEIGHTS = (0.5, 0.6, 0.7, 0.8, 0.9)
BM25_SETTINGS = ((1.5, 0.75), (1.2, 0.75), (0.9, 0.4), (1.5, 0.4), (2.0, 0.75))
SHIPPED = RetrieverConfig()
STAGES = ("bm25", "first", "expanded", "rerank")
NAMES = {
    "sgd": "SGD",
    "gorilla_apibench": "APIBench",
    "gorilla_apizoo": "API Zoo",
    "callnavi": "CallNavi",
    "api_bank": "API-Bank",
    "toolalpaca": "ToolAlpaca",
    "tooleyes": "ToolEyes",
    "tooltalk": "ToolTalk",
    "seal_beir": "Seal-Tools",
}


def left_out_set(folder: Path, limit: int) -> Set:
    """A training set as the leave-one-out experiments read it (at most 1,000 queries and
    1,200 tools, every relevant one kept), then ``limit`` of its queries (seeded)."""
    raw = read_set(folder)
    rows = {str(r["_id"]): r for r in _json_lines(folder / "corpus.jsonl")}
    picked = sorted(
        random.Random(0).sample(range(len(raw.query_ids)), min(limit, len(raw.query_ids)))
    )
    return Set(
        folder.name,
        [corpus_fields(rows[d]) for d in raw.doc_ids],
        [raw.query_texts[i] for i in picked],
        [{raw.doc_ids[j]: 1 for j in raw.positives[i]} for i in picked],
    )


def fold_encoders(train_dir: Path, base: Encoder, cache: Path) -> dict[str, Encoder]:
    """Each training set's encoder: the base encoder behind an adapter trained without it."""
    sets = [load_set(train_dir / n, base, cache_dir=cache, progress=False) for n in TRAIN_SETS]
    return {
        name: AdaptedEncoder(
            base,
            Adapter(fold_matrix(sets, name, cache), base.name.split(":onnx-")[0], f"fold-{name}"),
        )
        for name in TRAIN_SETS
    }


def _p50(seconds: Sequence[float]) -> float:
    return round(1000 * float(np.median(seconds)), 2) if seconds else 0.0


def score_set(data: Set, encoder: Encoder, reranker: Reranker, cache: Path) -> dict[str, Any]:
    """Every stage's NDCG@5 / Recall@5 and time, and the first stage over the grid."""
    documents = [make_document(f) for f in data.fields]
    vectors = embed_documents(
        encoder, [d.text for d in documents], cache_dir=cache, label=f"{data.name} tools"
    )
    written = [questions(f) for f in data.fields]
    owners = np.repeat(np.arange(len(written)), [len(q) for q in written]).astype(np.intp)
    extra = ExtraRows(
        embed_documents(
            encoder,
            [q for qs in written for q in qs],
            cache_dir=cache,
            label=f"{data.name} questions",
        ),
        owners,
    )
    plain = ToolIndex.from_config(documents, vectors, SHIPPED)
    expanded = ToolIndex.from_config(documents, vectors, SHIPPED, extra=extra)
    timing: dict[str, list[float]] = {
        k: [] for k in ("bm25", "embed", "search", "expansion", "rerank")
    }
    runs: dict[str, list[list[str]]] = {k: [] for k in ("bm25", "first", "expanded", "rerank")}
    query_rows = []
    for text in data.query_texts:
        started = time.perf_counter()
        runs["bm25"].append([h.id for h in plain.search(None, text, 10, method="bm25")])
        timing["bm25"].append(time.perf_counter() - started)
        started = time.perf_counter()
        rows = _encode_queries(encoder, [text], clauses=True)[0]
        timing["embed"].append(time.perf_counter() - started)
        query_rows.append(rows)
        started = time.perf_counter()
        hits = plain.search(rows, text, RERANK_DEPTH, method="hybrid", rerank=False)
        timing["search"].append(time.perf_counter() - started)
        started = time.perf_counter()
        runs["expanded"].append([h.id for h in expanded.search(rows, text, 10, method="hybrid")])
        timing["expansion"].append(time.perf_counter() - started - timing["search"][-1])
        runs["first"].append([h.id for h in hits])
        tools = [
            t.astype(np.float32)
            for t in reranker.tool_tokens([documents[plain._row_of_id[h.id]].text for h in hits])
        ]
        started = time.perf_counter()
        combined = maxsim(
            reranker.query_tokens(text), tools
        ) + SHIPPED.rerank_first_stage_weight * np.asarray(
            [h.score for h in hits], dtype=np.float32
        )
        timing["rerank"].append(time.perf_counter() - started)
        runs["rerank"].append([hits[i].id for i in np.argsort(-combined, kind="stable")])
    result: dict[str, Any] = {"tools": len(documents), "queries": len(data.query_texts)}
    result.update({k: metrics(v, data.relevant) for k, v in runs.items()})
    result["ndcg@5_per_query"] = {
        k: [round(ndcg_at(r, g, 5), 4) for r, g in zip(v, data.relevant, strict=True)]
        for k, v in runs.items()
    }
    result["p50_ms"] = {k: _p50(v) for k, v in timing.items()}
    result["grid"] = grid_scores(documents, vectors, data, query_rows)
    return result


def grid_scores(
    documents: list[Any], vectors: Any, data: Set, rows: list[Any]
) -> dict[str, dict[str, float]]:
    """The first stage's scores at every fusion weight and BM25 setting of the grid."""
    out = {}
    for (k1, b), weight in itertools.product(BM25_SETTINGS, DENSE_WEIGHTS):
        config = SHIPPED.model_copy(update={"dense_weight": weight, "bm25_k1": k1, "bm25_b": b})
        index = ToolIndex.from_config(documents, vectors, config)
        ranked = [
            [h.id for h in index.search(r, t, 10, method="hybrid")]
            for r, t in zip(rows, data.query_texts, strict=True)
        ]
        out[grid_key(weight, k1, b)] = metrics(ranked, data.relevant)
    return out


def grid_key(weight: float, k1: float, b: float) -> str:
    return f"w{weight}:k1={k1}:b={b}"


def _setting(key: str) -> str:
    weight, k1, b = key.split(":")
    return f"{weight[1:]}, k1 {k1[3:]}, b {b[2:]}"


def choose(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """For each row, the grid point with the best mean NDCG@5 over the training sets other
    than the row's own, and the row's scores there."""
    trained = [n for n in report if n.startswith("left_out:")]
    chosen = {}
    for row, result in report.items():
        if "grid" not in result:
            continue
        others = [n for n in trained if n != row]
        if not others:
            continue
        best = max(
            result["grid"], key=lambda g: np.mean([report[n]["grid"][g]["ndcg@5"] for n in others])
        )
        chosen[row] = {"setting": best, **result["grid"][best]}
    return chosen


def paired_gain(
    report: dict[str, Any], stage: str, rows: Sequence[str], draws: int = 2000
) -> tuple[float, float, float]:
    """``stage``'s NDCG@5 minus the first stage's, averaged over ``rows`` (each row's
    mean over its queries), and a 95 % bootstrap interval: each row's queries resampled
    with replacement, the pairs kept together."""
    rng = np.random.default_rng(0)
    gains = [
        np.asarray(report[r]["ndcg@5_per_query"][stage])
        - np.asarray(report[r]["ndcg@5_per_query"]["first"])
        for r in rows
    ]
    means = np.zeros(draws)
    for g in gains:
        means += g[rng.integers(0, len(g), size=(draws, len(g)))].mean(axis=1)
    means = 100 * means / len(gains)
    low, high = np.percentile(means, [2.5, 97.5])
    whole = 100 * float(np.mean([g.mean() for g in gains]))
    return round(whole, 2), round(float(low), 2), round(float(high), 2)


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [n for n in report if "bm25" in report[n]]
    stages = (
        ("bm25", "BM25"),
        ("first", "first stage"),
        ("expanded", "+ expansion"),
        ("rerank", "+ reranker"),
    )
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(11, 4.2))
    for i, (key, label) in enumerate(stages):
        bars = ax.bar(
            x + (i - 1.5) * 0.2, [report[r][key]["ndcg@5"] for r in rows], 0.2, label=label
        )
        if key == "rerank":  # hatched where the reranker trained on the set
            for bar, row in zip(bars, rows, strict=True):
                bar.set_hatch("//" if report[row].get("reranker_trained_on_it") else "")
    target = [min(100.0, 1.5 * report[r]["bm25"]["ndcg@5"]) for r in rows]
    ax.scatter(x, target, marker="_", s=300, color="black", label="1.5 x BM25 (target)", zorder=3)
    names = [NAMES.get(r.split(":", 1)[1], r.split(":", 1)[1]) for r in rows]
    ax.set_xticks(x, names, rotation=25, ha="right")
    ax.set_ylabel("NDCG@5 (%)")
    ax.set_ylim(0, 105)
    ax.set_title(
        "Retrieval by stage: training sets left out, then unseen (hatched: reranker trained on it)"
    )
    ax.legend(ncol=5, fontsize=8, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def unseen_gate(
    sets: Sequence[Set], size: int = 200, weights: GateWeightsName | Path = "shipped"
) -> dict[str, dict[str, float]]:
    """The shipped gate (balanced threshold) on each unseen set, as its left-out rows are
    made for the retrieval sets (``retriever.gate.retrieval_rows``): every query against a
    catalog of its gold tools filled with the set's others up to ``size`` ("needs a
    tool"), and again against the next set's catalog ("needs none"). ``weights``: another
    gate, as ``retriever.gate_weights`` names it."""
    from retriever.gate.catalog import CatalogGate
    from retriever.gate.features import gate_document
    from retriever.gate.model import load_gate, weights_path

    gate = load_gate(weights_path(weights))
    encoder = load_encoder(gate.encoder_config(RetrieverConfig()))
    catalogs = []
    for data in sets:
        gold = {d for g in data.relevant for d in g}
        others = [f for f in data.fields if f.id not in gold]
        kept = [f for f in data.fields if f.id in gold] + others[: max(0, size - len(gold))]
        catalogs.append(CatalogGate(gate, encoder, [gate_document(f) for f in kept]))
    out = {}
    for i, data in enumerate(sets):
        vectors = encoder.encode(data.query_texts)
        labels: list[bool] = []
        said: list[bool] = []
        scores: list[float] = []
        for own, needs in ((catalogs[i], True), (catalogs[(i + 1) % len(sets)], False)):
            for text, vector in zip(data.query_texts, vectors, strict=True):
                decision = own.decide_vector(vector, text)
                labels.append(needs)
                said.append(decision.needs_tool)
                scores.append(decision.score)
        out[data.name] = {
            **gate_score(labels, said),
            "auc": _auc(labels, scores),
            "rows": len(labels),
        }
    return out


def _auc(gold: Sequence[bool], scores: Sequence[float]) -> float:
    """The chance a "needs a tool" row scores above a "needs none" row (ties half)."""
    positive = np.asarray([s for g, s in zip(gold, scores, strict=True) if g])
    negative = np.asarray([s for g, s in zip(gold, scores, strict=True) if not g])
    above = (positive[:, None] > negative[None, :]).mean()
    ties = (positive[:, None] == negative[None, :]).mean()
    return round(float(above + ties / 2), 3)


def gate_score(gold: Sequence[bool], said: Sequence[bool]) -> dict[str, float]:
    hits = sum(g and s for g, s in zip(gold, said, strict=True))
    return {
        "accuracy": round(sum(g == s for g, s in zip(gold, said, strict=True)) / len(gold), 3),
        "precision": round(hits / max(1, sum(said)), 3),
        "recall": round(hits / max(1, sum(gold)), 3),
    }


def left_out_gate(gate: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Each left-out source's gate figures: from ``eval.gate_rules``'s file, the shipped
    gate's fit at the rule its file was chosen by; from ``eval.gate_report``'s, its own."""
    if "fits" in gate:
        from eval.gate_rules import SHIPPED

        found: dict[str, dict[str, float]] = gate["fits"]["shipped"]["rules"][SHIPPED]["left_out"]
        return found
    return {name: source["gate"] for name, source in gate.get("sources", {}).items()}


def markdown(report: dict[str, Any], gate: dict[str, Any]) -> str:
    """The docs' table: each stage's NDCG@5 / Recall@5, the first stage over BM25, the
    grid point chosen without the row, and the gate's left-out accuracy (recall)."""
    lines = [
        "| set | tools | queries | BM25 | first stage | + expansion | + reranker | first / BM25 "
        "| chosen without it | gate accuracy (recall) | load |",
        "|---|---:|---:|---|---|---|---|---:|---|---|---:|",
    ]
    gates = left_out_gate(gate)
    for name, row in report.items():
        if "bm25" not in row:
            continue
        kind, set_name = name.split(":", 1)
        label = NAMES.get(set_name, set_name)
        cells = [f"{row[k]['ndcg@5']:.1f} / {row[k]['recall@5']:.1f}" for k in STAGES]
        if row.get("reranker_trained_on_it"):
            cells[-1] += " *"
        chosen = report.get("chosen", {}).get(name)
        chosen_cell = f"{chosen['ndcg@5']:.1f} ({_setting(chosen['setting'])})" if chosen else "-"
        held = gates.get(set_name) or row.get("gate")
        gate_cell = f"{held['accuracy']:.3f} ({held['recall']:.3f})" if held else "-"
        ratio = row["first"]["ndcg@5"] / max(row["bm25"]["ndcg@5"], 1e-9)
        lines.append(
            f"| {label} ({kind.replace('_', ' ')}) | {row['tools']} | {row['queries']} | "
            + " | ".join(cells)
            + f" | {ratio:.2f}x | {chosen_cell} | {gate_cell} | {row['load_average']} |"
        )
    left_out = [n for n in report if n.startswith("left_out:") and "ndcg@5_per_query" in report[n]]
    if left_out:
        lines.append("")
        never_read = [n for n in left_out if not report[n].get("reranker_trained_on_it")]
        for stage, rows in (("expanded", left_out), ("rerank", never_read)):
            whole, low, high = paired_gain(report, stage, rows)
            lines.append(
                f"{stage} - first stage, NDCG@5, mean of {len(rows)} left-out sets: "
                f"{whole:+.2f} (95 % bootstrap interval {low:+.2f} to {high:+.2f})"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-dir", type=Path, default=dataset("train"))
    parser.add_argument(
        "--unseen",
        type=Path,
        nargs="*",
        default=unseen_sets(),
    )
    parser.add_argument("--queries", type=int, default=200, help="queries a set (seeded)")
    parser.add_argument("--distractors", type=int, default=2000, help="unseen sets' other tools")
    parser.add_argument("--cache-dir", type=Path, default=Path(".cache/retriever/embeddings"))
    parser.add_argument("--only", default="", help="rows to run, comma-separated")
    parser.add_argument("--json", type=Path, default=Path("eval/results/retrieval_table.json"))
    parser.add_argument("--plot", type=Path, default=None, help="draw the JSON's table and stop")
    parser.add_argument("--markdown", action="store_true", help="print the JSON's table and stop")
    parser.add_argument("--gate", type=Path, default=Path("eval/results/gate_rules.json"),
                        help="the left-out gate figures: eval.gate_rules's file (the shipped "
                        "rule's) or eval.gate_report's")  # fmt: skip
    parser.add_argument(
        "--gate-unseen", action="store_true", help="the gate on the unseen sets alone, then stop"
    )
    parser.add_argument(
        "--gate-weights",
        default="shipped",
        help="with --gate-unseen: the gate, as retriever.gate_weights names it: shipped, "
        "coverage, or the path of a gate file",
    )
    args = parser.parse_args(argv)
    try:
        gate_weights = read_weights(args.gate_weights, "--gate-weights")
    except BadInput as exc:
        raise SystemExit(f"eval.retrieval_table: {exc}") from None
    report: dict[str, Any] = json.loads(args.json.read_text()) if args.json.is_file() else {}
    if args.plot:
        plot(report, args.plot)
        return
    if args.markdown:
        print(markdown(report, json.loads(args.gate.read_text()) if args.gate.is_file() else {}))
        return
    if args.gate_unseen:
        unseen = [unseen_set(f, args.distractors, args.queries) for f in args.unseen]
        for name, found in unseen_gate(unseen, weights=gate_weights).items():
            print(name, found, flush=True)
            report.setdefault(f"unseen:{name}", {})["gate"] = {
                **found,
                "load_average": round(os.getloadavg()[0], 1),
            }
        args.json.write_text(json.dumps(report, indent=2) + "\n")
        return
    base = load_encoder(RetrieverConfig(adapter=False))
    shipped = load_encoder(SHIPPED)
    folds = fold_encoders(args.train_dir, base, args.cache_dir)
    reranker = Reranker(
        bundled_model_path(),
        load_weights(None),
        Path(".cache/retriever/onnx"),
        first_stage_weight=0.0,
    )
    rows: dict[str, tuple[Callable[[], Set], Encoder]] = {
        **{
            f"left_out:{n}": (partial(left_out_set, args.train_dir / n, args.queries), folds[n])
            for n in TRAIN_SETS
        },
        **{
            f"unseen:{f.name}": (partial(unseen_set, f, args.distractors, args.queries), shipped)
            for f in args.unseen
        },
    }
    only = {s for s in args.only.split(",") if s}
    for name, (make, encoder) in rows.items():
        if only and name not in only:
            continue
        started = time.perf_counter()
        result = score_set(make(), encoder, reranker, args.cache_dir)
        result["reranker_trained_on_it"] = (
            name.startswith("left_out:") and name.split(":")[1] not in HELD_OUT
        )
        result["load_average"] = round(os.getloadavg()[0], 1)
        result["seconds"] = round(time.perf_counter() - started)
        report[name] = result
        print(
            name,
            json.dumps({k: v for k, v in result.items() if k not in ("grid", "ndcg@5_per_query")}),
            flush=True,
        )
        report["chosen"] = choose({k: v for k, v in report.items() if k != "chosen"})
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
