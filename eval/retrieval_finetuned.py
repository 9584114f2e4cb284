"""Fine-tuned top layer against the linear adapter and the bare encoder, datasets left out.

Every text's states under the top layer are computed once (:mod:`retriever.finetune.states`,
cached under ``.cache/retriever/states``); each variant then runs the top layer alone:

* ``--folds``: the eight training sets split into two groups of four; each group is
  held out in turn, the fine-tuned layer and the linear adapter are trained on the
  other four, and every fusion weight is scored on the held-out sets. The best mean
  held-out NDCG@5 picks the variant and the weight.
* ``--final``: the fine-tuned layer trained on all eight sets, written to
  ``retriever/adapters/minilm-l6-v2-top1.npz``.
* ``--unseen``: toolbench_stable (a seeded sample, see ``--distractors``) and Seal-Tools,
  never used to choose anything, with BM25, the bare encoder, the linear adapter
  (the bundled file) and the fine-tuned layer (the file ``--final`` wrote).

::

    python -m eval.retrieval_finetuned --folds
    python -m eval.retrieval_finetuned --final
    python -m eval.retrieval_finetuned --unseen
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any

import numpy as np

from eval.data_folder import dataset, unseen_sets
from eval.retrieval import load_beir
from eval.retrieval_learned import WEIGHTS, EvalSet, score
from retriever.adapter import FINETUNED_LAYERS, LINEAR_ADAPTER, Adapter, load_adapter
from retriever.delta import WeightDelta, save_delta
from retriever.documents import corpus_fields, make_document
from retriever.embedder import Vectors, bundled_model_path
from retriever.finetune.adapter import AdapterSettings, train_adapter
from retriever.finetune.data import TRAIN_SETS, EmbeddedSet, read_set
from retriever.finetune.layers import LayerSettings, StatedSet, train_top_layers
from retriever.finetune.states import LowerLayers, States, encode_states

#: Two groups of four training sets; each is held out once.
FOLDS = (
    ("api_bank", "tooleyes", "toolalpaca", "gorilla_apibench"),
    ("callnavi", "tooltalk", "gorilla_apizoo", "sgd"),
)
CACHE = Path(".cache/retriever/states")


class Runner:
    """The lower layers, the top layer as bundled, and every set's states, loaded once."""

    def __init__(self, train_dir: Path, names: tuple[str, ...] = TRAIN_SETS) -> None:
        self.lower = LowerLayers(bundled_model_path(), trained=1, threads=1)
        self.names = self.lower.top_names
        self.sets: dict[str, StatedSet] = {}
        for name in names:
            data = read_set(train_dir / name)
            self.sets[name] = StatedSet(
                data,
                self.lower.cached_states(data.query_texts, CACHE, f"{name} queries"),
                self.lower.cached_states(data.doc_texts, CACHE, f"{name} tools"),
            )
        self._base: dict[str, tuple[Vectors, Vectors]] = {}

    def base_vectors(self, name: str) -> tuple[Vectors, Vectors]:
        """A set's query and tool vectors from the bundled encoder, computed when asked."""
        if name not in self._base:
            stated = self.sets[name]
            self._base[name] = (self.vectors(stated.queries), self.vectors(stated.tools))
        return self._base[name]

    def vectors(self, states: States, delta: WeightDelta | None = None) -> Vectors:
        if delta is None:
            return encode_states(self.lower.top, states)
        import copy

        top = copy.deepcopy(self.lower.top[0])
        tuned = WeightDelta(
            {k.removeprefix(f"{self.names[0]}."): v for k, v in delta.tensors.items()},
            delta.base_model,
            delta.digest,
        )
        tuned.apply(top)
        return encode_states([top], states)

    def train_layer(self, names: list[str], settings: LayerSettings) -> tuple[WeightDelta, float]:
        from retriever.delta import delta_from_arrays

        report = train_top_layers(
            self.lower.top, self.names, [self.sets[n] for n in names], settings
        )
        quarter = max(1, settings.steps // 4)
        print(
            f"  trained on {names}: {settings.steps} steps in {report.seconds:.0f} s, mean loss "
            f"{np.mean(report.losses[:quarter]):.3f} (first quarter) -> "
            f"{np.mean(report.losses[-quarter:]):.3f} (last)",
            flush=True,
        )
        return delta_from_arrays(
            report.deltas, f"flag:{self.lower.model.name}:mean"
        ), report.seconds

    def embedded(self, name: str) -> EmbeddedSet:
        stated = self.sets[name]
        queries, tools = self.base_vectors(name)
        data = stated.data
        return EmbeddedSet(
            data.name,
            data.doc_ids,
            data.doc_texts,
            data.doc_keys,
            tools,
            data.query_ids,
            data.query_texts,
            queries,
            data.positives,
            data.negatives,
        )

    def eval_set(self, name: str, delta: WeightDelta | None) -> EvalSet:
        stated = self.sets[name]
        data = stated.data
        return EvalSet(
            name=name,
            doc_ids=data.doc_ids,
            doc_texts=data.doc_texts,
            doc_vectors=self.base_vectors(name)[1]
            if delta is None
            else self.vectors(stated.tools, delta),
            query_texts=data.query_texts,
            query_vectors=self.base_vectors(name)[0]
            if delta is None
            else self.vectors(stated.queries, delta),
            relevant=[{data.doc_ids[i]: 1 for i in rows} for rows in data.positives],
        )


def folds(
    runner: Runner,
    settings: LayerSettings,
    report: dict[str, Any],
    groups: list[int],
    *,
    with_adapter: bool,
) -> None:
    held: dict[str, Any] = {}
    seconds = []
    for group in [FOLDS[g] for g in groups]:
        rest = [n for n in TRAIN_SETS if n not in group]
        delta, spent = runner.train_layer(rest, settings)
        seconds.append(spent)
        matrix = (
            train_adapter(
                [runner.embedded(n) for n in rest], AdapterSettings(), progress=False
            ).matrix
            if with_adapter
            else None
        )
        for name in group:
            base = runner.eval_set(name, None)
            tuned = runner.eval_set(name, delta)
            tuned.bm25_top = base.lexical()
            held[name] = {
                "base": score(base, None, WEIGHTS),
                "finetune-top1": score(tuned, None, WEIGHTS),
            }
            if matrix is not None:
                held[name]["adapter-full"] = score(base, matrix, WEIGHTS)
            print(name, json.dumps(_summary(held[name])), flush=True)
    means = {
        f"{variant}/{method}": float(np.mean([held[s][variant][method]["ndcg@5"] for s in held]))
        for variant in ("base", "finetune-top1", *(("adapter-full",) if with_adapter else ()))
        for method in ["dense", "bm25", *(f"hybrid@{w}" for w in WEIGHTS)]
    }
    report["folds"] = {
        "groups": [list(FOLDS[g]) for g in groups],
        "held_out": held,
        "mean_ndcg@5": means,
        "best": max(means, key=lambda k: means[k]),
        "train_seconds": seconds,
        "settings": settings.__dict__,
    }
    print("best", report["folds"]["best"], round(means[report["folds"]["best"]], 2), flush=True)


def final(runner: Runner, settings: LayerSettings, report: dict[str, Any], out: Path) -> None:
    delta, spent = runner.train_layer(list(TRAIN_SETS), settings)
    save_delta(delta.tensors, delta.base_model, out)
    report["final"] = {
        "seconds": spent,
        "bytes": out.stat().st_size,
        "digest": delta.digest,
        "settings": settings.__dict__,
    }
    print(f"wrote {out} ({out.stat().st_size / 1e6:.2f} MB, digest {delta.digest})", flush=True)


def unseen_texts(folder: Path, distractors: int) -> tuple[Any, list[Any], list[str]]:
    """The set, its kept documents (every relevant one and a seeded sample of the rest)
    and its queries' texts."""
    data = load_beir(folder)
    documents = [make_document(corpus_fields(row)) for row in data.corpus]
    relevant = {doc for docs in data.qrels.values() for doc in docs}
    rest = [doc for doc in documents if doc.id not in relevant]
    random.Random(0).shuffle(rest)
    # Relevant first, then the sample in its seeded order: the states are cached by
    # chunks in this order, so a smaller sample reuses a larger one's.
    kept = [doc for doc in documents if doc.id in relevant] + rest[:distractors]
    return data, kept, [q.text for q in data.queries]


def unseen(runner: Runner, folders: list[Path], distractors: int, report: dict[str, Any]) -> None:
    linear = load_adapter(LINEAR_ADAPTER)
    tuned = load_adapter(FINETUNED_LAYERS)
    if not isinstance(linear, Adapter) or not isinstance(tuned, WeightDelta):
        raise SystemExit(f"{LINEAR_ADAPTER} or {FINETUNED_LAYERS} is not what it should be")
    out: dict[str, Any] = {}
    for folder in folders:
        out[folder.name] = _score_unseen(runner, folder, distractors, linear, tuned)
        print(folder.name, json.dumps(_summary(out[folder.name])), flush=True)
    report.setdefault("unseen", {}).update(out)


def _score_unseen(
    runner: Runner, folder: Path, distractors: int, linear: Adapter, tuned: WeightDelta
) -> dict[str, Any]:
    data, documents, queries = unseen_texts(folder, distractors)
    texts = [doc.text for doc in documents]
    tool_states = runner.lower.chunked_states(texts, CACHE, f"{folder.name} tools")
    query_states = runner.lower.chunked_states(queries, CACHE, f"{folder.name} queries")
    sets = {}
    for name, delta in (("base", None), ("finetune-top1", tuned)):
        sets[name] = EvalSet(
            name=folder.name,
            doc_ids=[doc.id for doc in documents],
            doc_texts=texts,
            doc_vectors=runner.vectors(tool_states, delta),
            query_texts=queries,
            query_vectors=runner.vectors(query_states, delta),
            relevant=[data.qrels[q.id] for q in data.queries],
            corpus_size=len(data.corpus),
        )
    sets["finetune-top1"].bm25_top = sets["base"].lexical()
    return {
        "base": score(sets["base"], None, (0.5, 0.8)),
        "adapter-full": score(sets["base"], linear.matrix, (0.5, 0.8)),
        "finetune-top1": score(sets["finetune-top1"], None, (0.5, 0.8)),
        "documents": len(documents),
        "corpus": len(data.corpus),
    }


def _summary(result: dict[str, Any]) -> dict[str, Any]:
    return {
        variant: {m: r[m]["ndcg@5"] for m in r if m in ("bm25", "dense") or "hybrid" in m}
        for variant, r in result.items()
        if isinstance(r, dict)
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=Path, default=dataset("train"))
    parser.add_argument("--json", type=Path, default=Path("eval/results/retrieval_finetuned.json"))
    parser.add_argument("--folds", action="store_true")
    parser.add_argument("--final", action="store_true")
    parser.add_argument("--unseen", action="store_true")
    parser.add_argument("--steps", type=int, default=LayerSettings().steps)
    parser.add_argument("--lr", type=float, default=LayerSettings().learning_rate)
    parser.add_argument("--batch", type=int, default=LayerSettings().batch_size)
    parser.add_argument("--random-tools", type=int, default=LayerSettings().random_tools)
    parser.add_argument("--tool-tokens", type=int, default=LayerSettings().max_tool_tokens)
    parser.add_argument(
        "--with-adapter",
        action="store_true",
        help="train the linear adapter on each fold too (needs every training set's vectors)",
    )
    parser.add_argument(
        "--groups", type=int, nargs="*", default=[0, 1], help="which FOLDS to hold out"
    )
    parser.add_argument("--out", type=Path, default=FINETUNED_LAYERS)
    parser.add_argument(
        "--unseen-sets",
        type=Path,
        nargs="*",
        default=unseen_sets(),
    )
    parser.add_argument(
        "--distractors",
        type=int,
        default=5570,
        help="irrelevant tools kept per unseen set, a seeded sample (5570: the 6,794-tool "
        "toolbench_stable sample of retriever/README.md)",
    )
    args = parser.parse_args()
    settings = LayerSettings(
        steps=args.steps,
        learning_rate=args.lr,
        batch_size=args.batch,
        random_tools=args.random_tools,
        max_tool_tokens=args.tool_tokens,
    )
    report: dict[str, Any] = json.loads(args.json.read_text()) if args.json.is_file() else {}
    runner = Runner(args.train)
    started = time.perf_counter()
    if args.folds:
        folds(runner, settings, report, args.groups, with_adapter=args.with_adapter)
        _write(args.json, report)
    if args.final:
        final(runner, settings, report, args.out)
        _write(args.json, report)
    if args.unseen:
        unseen(runner, args.unseen_sets, args.distractors, report)
        _write(args.json, report)
    print(f"{time.perf_counter() - started:.0f} s", flush=True)


def _write(path: Path, report: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
