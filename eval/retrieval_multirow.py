"""Document-side variants of the shipped retrieval, measured leave-one-dataset-out.

Today's default (the baseline here): the bundled MiniLM behind the learned adapter,
one row per tool (its enriched document), the query's rows the whole text and its
clauses (``retriever.clauses``: a tool's dense score is its best cosine over them), BM25
(k1 0.9, b 0.4) over the whole text, weighted RRF (dense 0.8, constant 60). The
families measured against it, each with its settings chosen on training folds only:

* ``rows``: multi-row documents. Each tool also gets rows for parts of its document
  (``head``: name, group, category and description; ``params``: name and parameters;
  ``param``: name and one parameter, a row per parameter), and its dense score combines
  its rows: the best over all of them (``max``) or ``(1 - w) * full + w * best part``
  (``mix@w``), then the best over the query's rows.
* ``fusion``: RRF's constant, BM25's k1 and b and the dense weight.
* ``prf``: pseudo-relevance feedback on the dense side: each query row moved towards
  the mean of the first pass's top ``m`` tools by ``alpha``, then searched again.
* ``convex``: score fusion instead of RRF, ``c * cosine / best cosine + (1 - c) * BM25 /
  best BM25`` over the two rankings' top ``FUSION_DEPTH`` (what ships, in
  ``ToolIndex._fuse_scores``); ``convex+rows``: the same with multi-row documents.
* ``all``: rows and the fusion constants together, under RRF.

For each held-out set, each family's setting is the one with the best mean NDCG@5 on
the other seven sets (each scored with the adapter trained without it); the held-out
set is scored with that setting. Unseen sets choose nothing::

    python -m eval.retrieval_multirow --lodo
    python -m eval.retrieval_multirow --plot
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from eval.retrieval_folds import SHIPPED_WEIGHT, fold_matrix, mapped
from eval.retrieval_learned import KS, EvalSet, from_training, metrics
from retriever.bulk import embed_documents
from retriever.clauses import split_clauses
from retriever.config import RetrieverConfig
from retriever.documents import ToolFields, _param_text, corpus_fields, name_words
from retriever.embedder import Encoder, Vectors, load_encoder
from retriever.finetune.data import TRAIN_SETS, _json_lines, load_set
from retriever.index import FUSION_DEPTH
from retriever.lexical import BM25Index

#: Parameter rows kept per tool (the first ones: required parameters come first).
MAX_PARAM_ROWS = 8

#: The part rows a tool may have, in the order they are built.
PARTS = ("head", "params", "param")


@dataclass(frozen=True)
class Setting:
    """One way to rank: how a tool's rows combine, the fusion and the feedback."""

    rows: str = "full"  # full | max:<parts> | mix@<w>:<parts>
    rrf_k: int = 60
    k1: float = 0.9
    b: float = 0.4
    dense_weight: float = SHIPPED_WEIGHT
    prf_alpha: float = 0.0
    prf_m: int = 3
    convex: float = 0.0  # > 0: score fusion, this share to the dense score, not RRF
    norm: str = "depth"  # how score fusion scales the dense score (see convex_order)

    def label(self) -> str:
        parts = [self.rows, f"k{self.rrf_k}", f"bm25({self.k1},{self.b})", f"w{self.dense_weight}"]
        if self.prf_alpha:
            parts.append(f"prf({self.prf_alpha},{self.prf_m})")
        if self.convex:
            parts = [self.rows, f"convex{self.convex}", f"bm25({self.k1},{self.b})"]
            if self.norm != "depth":
                parts.append(self.norm)
        return " ".join(parts)


DEFAULT = Setting()

ROWS = (
    "full",
    "max:head",
    "max:params",
    "max:head+params",
    "max:head+params+param",
    "mix@0.25:head+params",
    "mix@0.5:head+params",
    "mix@0.25:head+params+param",
    "mix@0.5:head+params+param",
    "mix@0.25:param",
    "mix@0.5:param",
)
RRF_KS = (10, 20, 30, 60, 100)
BM25S = ((0.9, 0.4), (1.2, 0.4), (1.2, 0.75), (1.5, 0.75), (0.6, 0.3), (0.9, 0.75))
DENSE_WEIGHTS = (0.6, 0.7, 0.8, 0.9)
PRFS = ((0.0, 3), (0.25, 3), (0.5, 3), (0.25, 5), (0.5, 5), (0.25, 1))
CONVEX = (0.5, 0.6, 0.7, 0.8, 0.9)
NORMS = ("depth", "raw", "top")


def families() -> dict[str, list[Setting]]:
    """Each family's settings (the default is in every one, so a fold may keep it)."""
    fusion = [
        Setting(rrf_k=k, k1=k1, b=b, dense_weight=w)
        for k, (k1, b), w in itertools.product(RRF_KS, BM25S, DENSE_WEIGHTS)
    ]
    return {
        "rows": [Setting(rows=r) for r in ROWS],
        "rrf_k": [Setting(rrf_k=k) for k in RRF_KS],
        "bm25": [Setting(k1=k1, b=b) for k1, b in BM25S],
        "fusion": fusion,
        "prf": [Setting(prf_alpha=a, prf_m=m) for a, m in PRFS],
        "convex+rows": [DEFAULT]
        + [
            Setting(rows=r, convex=c, k1=k1, b=b, norm="top")
            for r, c, (k1, b) in itertools.product(
                ("full", "max:head", "mix@0.25:head+params+param"), CONVEX, BM25S
            )
        ],
        "convex": [DEFAULT]
        + [
            Setting(convex=c, k1=k1, b=b, norm=n)
            for c, (k1, b), n in itertools.product(CONVEX, BM25S, NORMS)
        ],
    }


def joint(best_rows: Sequence[str]) -> list[Setting]:
    """Rows and the fusion constants together, over the row rules given (the grid is their
    product; feedback, which lost alone, is left out to keep the grid to minutes)."""
    return [
        Setting(rows=r, rrf_k=k, k1=k1, b=b, dense_weight=w, prf_alpha=a, prf_m=m)
        for r, k, (k1, b), w, (a, m) in itertools.product(
            best_rows, RRF_KS, BM25S, DENSE_WEIGHTS, PRFS[:1]
        )
    ]


def part_texts(fields: ToolFields) -> dict[str, list[str]]:
    """A tool's part rows: its head, its parameters together, each parameter alone."""
    name = name_words(fields.name)
    where = ", ".join(part for part in (fields.group, fields.category) if part)
    title = f"{name} ({where})" if where else name
    head = f"{title}\n{fields.description}" if fields.description else title
    params = [_param_text(param) for param in fields.params]
    out: dict[str, list[str]] = {"head": [head], "params": [], "param": []}
    if params:
        out["params"] = [f"{name}\nParameters: " + "; ".join(params)]
        out["param"] = [f"{name}: {text}" for text in params[:MAX_PARAM_ROWS]]
    return out


@dataclass
class Prepared:
    """One set under one map: every row's vector and every query's rows, mapped."""

    data: EvalSet
    docs: Vectors  # (tools, d): the full document
    part_vectors: dict[str, Vectors]  # part -> (rows, d)
    part_owner: dict[str, np.ndarray[Any, Any]]  # part -> (rows,) tool index
    queries: Vectors  # (all query rows, d): each query's whole text then its clauses
    query_start: np.ndarray[Any, Any]  # (queries,) first row of each query
    bm25: dict[tuple[float, float], np.ndarray[Any, Any]] = field(default_factory=dict)
    bm25_scores: dict[tuple[float, float], Vectors] = field(default_factory=dict)


def prepare(
    data: EvalSet,
    fields: list[ToolFields] | None,
    matrix: Vectors | None,
    encoder: Encoder,
    cache: Path,
) -> Prepared:
    """``fields`` None: no part rows (only ``rows="full"`` settings can be ranked)."""
    parts: dict[str, list[str]] = {p: [] for p in PARTS}
    owners: dict[str, list[int]] = {p: [] for p in PARTS}
    for tool, one in enumerate(fields or []):
        for part, texts in part_texts(one).items():
            parts[part] += texts
            owners[part] += [tool] * len(texts)
    rows: list[str] = []
    starts: list[int] = []
    for text in data.query_texts:
        starts.append(len(rows))
        rows += [text, *split_clauses(text)]
    embed = _embedder(encoder, cache)
    return Prepared(
        data=data,
        docs=mapped(data.doc_vectors, matrix),
        part_vectors={p: mapped(embed(parts[p]), matrix) for p in PARTS},
        part_owner={p: np.asarray(owners[p], dtype=np.intp) for p in PARTS},
        queries=mapped(embed(rows), matrix),
        query_start=np.asarray(starts, dtype=np.intp),
    )


def _embedder(encoder: Encoder, cache: Path) -> Callable[[list[str]], Vectors]:
    def embed(texts: list[str]) -> Vectors:
        if not texts:
            return np.zeros((0, encoder.dim), dtype=np.float32)
        return embed_documents(encoder, texts, cache_dir=cache, progress=False)

    return embed


def tool_scores(prep: Prepared, queries: Vectors, rows: str) -> Vectors:
    """(query rows, tools): each tool's dense score for each query row under ``rows``."""
    full = queries @ prep.docs.T
    if rows == "full":
        return full
    rule, _, names = rows.partition(":")
    best = np.full_like(full, -np.inf)
    for part in names.split("+"):
        vectors, owner = prep.part_vectors[part], prep.part_owner[part]
        if not len(owner):
            continue
        # Rows are built tool by tool, so each tool's rows are one run of columns.
        tools, starts = np.unique(owner, return_index=True)
        part_best = np.maximum.reduceat(queries @ vectors.T, starts, axis=1)
        best[:, tools] = np.maximum(best[:, tools], part_best)
    if rule == "max":
        combined: Vectors = np.maximum(full, best)
        return combined
    weight = float(rule.split("@")[1])
    # A tool without the part keeps its full score.
    best = np.where(np.isfinite(best), best, full)
    mixed: Vectors = ((1 - weight) * full + weight * best).astype(np.float32)
    return mixed


def dense_scores(prep: Prepared, setting: Setting) -> Vectors:
    """(queries, tools): the best over each query's rows, after feedback if any."""
    per_row = tool_scores(prep, prep.queries, setting.rows)
    scores = np.maximum.reduceat(per_row, prep.query_start, axis=0)
    if not setting.prf_alpha:
        return scores
    # The feedback is the default fusion's top tools, whatever fusion ranks the second pass.
    first_pass = Setting(rows=setting.rows)
    first = fused_order(prep, first_pass, scores)[:, : setting.prf_m]
    feedback = prep.docs[first].mean(axis=1)  # (queries, d)
    owner = np.repeat(
        np.arange(len(prep.query_start)), np.diff([*prep.query_start, len(prep.queries)])
    )
    moved = prep.queries + setting.prf_alpha * feedback[owner]
    moved /= np.linalg.norm(moved, axis=1, keepdims=True)
    return np.maximum.reduceat(tool_scores(prep, moved, setting.rows), prep.query_start, axis=0)


def bm25_tops(prep: Prepared, k1: float, b: float) -> np.ndarray[Any, Any]:
    """(queries, FUSION_DEPTH): BM25's ranking of each whole query, -1 past its hits."""
    key = (k1, b)
    if key not in prep.bm25:
        index = BM25Index(prep.data.doc_texts, k1=k1, b=b)
        depth = min(FUSION_DEPTH, len(prep.data.doc_ids))
        out = np.full((len(prep.data.query_texts), depth), -1, dtype=np.intp)
        every = np.zeros((len(prep.data.query_texts), len(prep.data.doc_ids)), dtype=np.float32)
        for row, text in enumerate(prep.data.query_texts):
            scores = every[row] = index.scores(text)
            order = np.argsort(-scores, kind="stable")[:depth]
            hits = order[scores[order] > 0]
            out[row, : len(hits)] = hits
        prep.bm25[key] = out
        prep.bm25_scores[key] = every
    return prep.bm25[key]


def convex_order(prep: Prepared, setting: Setting, dense: Vectors) -> np.ndarray[Any, Any]:
    """(queries, 10): ``c * dense + (1 - c) * bm25``, each scaled per query. The dense
    score: ``depth``, from its ``FUSION_DEPTH``-th best (0) to its best (1), floored at 0;
    ``top``, divided by its best; ``raw``, the cosine. BM25 divided by its best."""
    bm25_tops(prep, setting.k1, setting.b)
    lexical = prep.bm25_scores[(setting.k1, setting.b)]
    depth = min(FUSION_DEPTH, dense.shape[1])
    ordered = -np.sort(-dense, axis=1)
    top, floor = ordered[:, :1], ordered[:, depth - 1 : depth]
    if setting.norm == "depth":
        scaled = np.clip((dense - floor) / np.maximum(top - floor, 1e-6), 0.0, None)
    elif setting.norm == "top":
        scaled = dense / np.maximum(top, 1e-6)
    else:
        scaled = dense
    best = lexical.max(axis=1, keepdims=True)
    words = np.where(best > 0, lexical / np.maximum(best, 1e-6), 0.0)
    fused = setting.convex * scaled + (1 - setting.convex) * words
    # Only the two rankings' top FUSION_DEPTH are candidates, as in the index.
    rows = np.arange(len(dense))[:, None]
    candidate = np.zeros(dense.shape, dtype=bool)
    candidate[rows, np.argsort(-dense, axis=1, kind="stable")[:, :depth]] = True
    lexical_top = bm25_tops(prep, setting.k1, setting.b)
    hit = lexical_top >= 0
    candidate[np.broadcast_to(rows, lexical_top.shape)[hit], lexical_top[hit]] = True
    fused = np.where(candidate, fused, -np.inf)
    return np.argsort(-fused, axis=1, kind="stable")[:, : max(KS)]


def fused_order(prep: Prepared, setting: Setting, dense: Vectors) -> np.ndarray[Any, Any]:
    """(queries, 10): the index's fusion of the dense and BM25 top ``FUSION_DEPTH``
    (ties by index, as ``reciprocal_rank_fusion`` breaks them)."""
    if setting.convex:
        return convex_order(prep, setting, dense)
    n_queries, n_tools = dense.shape
    depth = min(FUSION_DEPTH, n_tools)
    dense_top = np.argsort(-dense, axis=1, kind="stable")[:, :depth]
    ranks = 1.0 / (setting.rrf_k + np.arange(1, depth + 1))
    fused = np.zeros((n_queries, n_tools))
    rows = np.arange(n_queries)[:, None]
    fused[rows, dense_top] += 2 * setting.dense_weight * ranks
    lexical = bm25_tops(prep, setting.k1, setting.b)
    hit = lexical >= 0
    weights = np.where(hit, 2 * (1 - setting.dense_weight) * ranks[: lexical.shape[1]], 0.0)
    np.add.at(fused, (np.broadcast_to(rows, lexical.shape)[hit], lexical[hit]), weights[hit])
    # A query BM25 has nothing for keeps the dense ranking (as the index does).
    return np.argsort(-fused, axis=1, kind="stable")[:, : max(KS)]


def rank(prep: Prepared, setting: Setting) -> list[list[int]]:
    return fused_order(prep, setting, dense_scores(prep, setting)).tolist()  # type: ignore[no-any-return]


def ndcg5_grid(prep: Prepared, settings: Sequence[Setting]) -> dict[str, dict[str, float]]:
    """Every setting's metrics on one prepared set (dense scores shared where they can be)."""
    out: dict[str, dict[str, float]] = {}
    dense_cache: dict[tuple[str, float, int], Vectors] = {}
    for setting in settings:
        key = (setting.rows, setting.prf_alpha, setting.prf_m if setting.prf_alpha else 0)
        if key not in dense_cache:
            dense_cache[key] = dense_scores(prep, setting)
        ranked = fused_order(prep, setting, dense_cache[key]).tolist()
        out[setting.label()] = metrics(prep.data, ranked)
    return out


def choose(
    per_set: dict[str, dict[str, dict[str, float]]], labels: Sequence[str]
) -> dict[str, Any]:
    """Per held-out set, the setting best on the others and its held-out metrics."""
    names = list(per_set)

    def mean(keys: Sequence[str], label: str) -> float:
        return float(np.mean([per_set[k][label]["ndcg@5"] for k in keys]))

    folds: dict[str, Any] = {}
    for held in names:
        others = [n for n in names if n != held]
        chosen = max(labels, key=lambda label: (mean(others, label), label == DEFAULT.label()))
        folds[held] = {"chosen": chosen, **per_set[held][chosen]}
    held_mean = float(np.mean([folds[n]["ndcg@5"] for n in names]))
    overall = max(labels, key=lambda label: mean(names, label))
    return {
        "folds": folds,
        "held_out_mean_ndcg@5": held_mean,
        "best_on_all": overall,
        "best_on_all_per_set": {n: per_set[n][overall] for n in names},
    }


def fields_of(folder: Path, doc_ids: Sequence[str]) -> list[ToolFields]:
    by_id = {str(row["_id"]): row for row in _json_lines(folder / "corpus.jsonl")}
    return [corpus_fields(by_id[doc_id]) for doc_id in doc_ids]


def lodo(args: argparse.Namespace) -> dict[str, Any]:
    encoder = load_encoder(RetrieverConfig(device="cpu", adapter=False))
    names = args.sets.split(",")
    sets = [load_set(args.train / n, encoder, cache_dir=args.cache, progress=False) for n in names]
    grids = {f: s for f, s in families().items() if f in args.families.split(",")}
    per_family: dict[str, dict[str, dict[str, dict[str, float]]]] = {f: {} for f in grids}
    baseline: dict[str, dict[str, dict[str, float]]] = {}
    prepared: dict[str, Prepared] = {}
    for data in sets:
        started = time.perf_counter()
        matrix = fold_matrix(sets, data.name, args.cache)
        evaluation = from_training(data)
        prep = prepare(
            evaluation, fields_of(args.train / data.name, data.doc_ids), matrix, encoder, args.cache
        )
        prepared[data.name] = prep
        bm25 = bm25_tops(prep, DEFAULT.k1, DEFAULT.b)
        baseline[data.name] = {
            "bm25": metrics(evaluation, [[int(i) for i in row if i >= 0] for row in bm25]),
            "default": metrics(evaluation, rank(prep, DEFAULT)),
        }
        for family, settings in grids.items():
            per_family[family][data.name] = ndcg5_grid(prep, settings)
        seconds = time.perf_counter() - started
        print(
            f"{data.name:>18} bm25 {baseline[data.name]['bm25']['ndcg@5']:.1f} default "
            f"{baseline[data.name]['default']['ndcg@5']:.1f} ({seconds:.0f} s)",
            flush=True,
        )
    report: dict[str, Any] = {"baseline": baseline, "families": {}}
    for family, settings in grids.items():
        labels = [s.label() for s in settings]
        report["families"][family] = choose(per_family[family], labels)
        _print_family(family, report["families"][family], baseline)
    if args.no_joint:
        report["grids"] = per_family
        return report
    # The joint grid over the row rules any fold of the rows family chose, and the full row.
    rows_chosen = sorted(
        {_rows_of(f["chosen"]) for f in report["families"]["rows"]["folds"].values()}
    )
    joint_settings = joint(sorted({"full", *rows_chosen}))
    per_joint = {name: ndcg5_grid(prep, joint_settings) for name, prep in prepared.items()}
    report["families"]["all"] = choose(per_joint, [s.label() for s in joint_settings])
    _print_family("all", report["families"]["all"], baseline)
    report["grids"] = {f: per_family[f] for f in ("rows", "rrf_k", "bm25", "prf") if f in grids}
    return report


#: What the unseen sets are scored with: the old default, the shipped setting (the score
#: fusion family's choice on all eight training sets) and the RRF-tuning family's choice.
UNSEEN = {
    "default before (RRF 0.8, k 60, BM25 0.9/0.4)": DEFAULT,
    "fusion family's choice (RRF 0.6, k 10, BM25 1.5/0.75)": Setting(
        rrf_k=10, k1=1.5, b=0.75, dense_weight=0.6
    ),
    "score fusion 0.7, BM25 1.5/0.75 (shipped)": Setting(convex=0.7, k1=1.5, b=0.75, norm="top"),
}


def unseen(args: argparse.Namespace) -> dict[str, Any]:
    """BM25 (before and after) and :data:`UNSEEN` on each unseen set, with the shipped
    adapter; these sets choose nothing."""
    from eval.retrieval_learned import from_beir
    from retriever.adapter import LINEAR_ADAPTER, Adapter, load_adapter

    encoder = load_encoder(RetrieverConfig(device="cpu", adapter=False))
    adapter = load_adapter(LINEAR_ADAPTER)
    assert isinstance(adapter, Adapter)
    out: dict[str, Any] = {}
    for folder in args.unseen_sets:
        data = from_beir(folder, encoder, args.unseen_cache, sample=args.sample)
        prep = prepare(data, None, adapter.matrix, encoder, args.unseen_cache)
        results: dict[str, Any] = {}
        for k1, b in ((0.9, 0.4), (1.5, 0.75)):
            tops = bm25_tops(prep, k1, b)
            results[f"bm25 ({k1}/{b})"] = metrics(
                data, [[int(i) for i in row if i >= 0] for row in tops]
            )
        for name, setting in UNSEEN.items():
            results[name] = metrics(data, rank(prep, setting))
        results["documents"] = {"count": len(data.doc_ids), "corpus": data.corpus_size}
        out[data.name] = results
        print(data.name, json.dumps(results), flush=True)
    return out


#: The families drawn, in order, with the names the README's table gives them.
DRAWN = {
    "rows": "(a) multi-row documents",
    "fusion": "(b) RRF k, BM25 k1/b, weight",
    "prf": "(c) dense PRF",
    "all": "(a)+(b) together, RRF",
    "convex": "(c) score fusion (shipped)",
    "convex+rows": "(c) score fusion + (a)",
}


def plot(report: dict[str, Any], out: Path) -> None:
    """NDCG@5 per held-out set: BM25, the old default and each family's held-out figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(report["baseline"])
    bars: dict[str, list[float]] = {
        "BM25": [report["baseline"][n]["bm25"]["ndcg@5"] for n in names],
        "default before": [report["baseline"][n]["default"]["ndcg@5"] for n in names],
    }
    for family, label in DRAWN.items():
        if family in report["families"]:
            folds = report["families"][family]["folds"]
            bars[label] = [folds[n]["ndcg@5"] for n in names]
    figure, axes = plt.subplots(figsize=(12, 4.5))
    width = 0.8 / len(bars)
    xs = np.arange(len(names))
    for number, (label, values) in enumerate(bars.items()):
        axes.bar(xs + (number - len(bars) / 2 + 0.5) * width, values, width, label=label)
    axes.set_xticks(xs, names, fontsize=8)
    axes.set_ylabel("NDCG@5 (%), held out")
    axes.set_title("Leave-one-dataset-out: each family's setting chosen on the other seven sets")
    axes.set_ylim(0, 112)
    axes.legend(fontsize=7, ncol=4, loc="upper center")
    figure.tight_layout()
    figure.savefig(out, dpi=110)
    plt.close(figure)


def _rows_of(label: str) -> str:
    return label.split(" ")[0]


def _print_family(family: str, result: dict[str, Any], baseline: dict[str, Any]) -> None:
    gains = {n: f["ndcg@5"] - baseline[n]["default"]["ndcg@5"] for n, f in result["folds"].items()}
    default_mean = float(np.mean([b["default"]["ndcg@5"] for b in baseline.values()]))
    held = result["held_out_mean_ndcg@5"]
    print(
        f"{family}: held-out mean {held:.2f} (default {default_mean:.2f}); "
        + " ".join(f"{n}={g:+.1f}" for n, g in gains.items())
        + f"; best on all: {result['best_on_all']}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=Path, default=Path("../shared/data/train"))
    parser.add_argument("--cache", type=Path, default=Path(".cache/retriever/train_embeddings"))
    parser.add_argument("--sets", default=",".join(TRAIN_SETS))
    parser.add_argument("--json", type=Path, default=Path("eval/results/retrieval_multirow.json"))
    parser.add_argument("--lodo", action="store_true")
    parser.add_argument("--families", default="rows,rrf_k,bm25,fusion,prf,convex,convex+rows")
    parser.add_argument("--no-joint", action="store_true", help="skip the joint grid")
    parser.add_argument(
        "--plot", type=Path, nargs="?", const=Path("retriever/retrieval_multirow.png")
    )
    parser.add_argument("--unseen", action="store_true")
    parser.add_argument("--sample", action="store_true", help="see eval.retrieval_learned")
    parser.add_argument("--unseen-sets", type=Path, nargs="*", default=[])
    parser.add_argument("--unseen-cache", type=Path, default=Path(".cache/retriever/embeddings"))
    parser.add_argument("--merge", type=Path, nargs="*", default=[], help="more --lodo files")
    args = parser.parse_args()
    report: dict[str, Any] = json.loads(args.json.read_text()) if args.json.is_file() else {}
    for path in args.merge:
        report["families"].update(json.loads(path.read_text())["families"])
    if args.lodo:
        report.update(lodo(args))
    if args.unseen:
        report.setdefault("unseen", {}).update(unseen(args))
    if args.lodo or args.unseen or args.merge:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    if args.plot:
        plot(report, args.plot)


if __name__ == "__main__":
    main()
