"""``toolgraph eval retrieval``: Recall@k and NDCG@k of the retriever on a BEIR folder.

The folder holds ``corpus.jsonl`` (or ``.jsonl.gz``; ``_id`` with ``title``/``text``,
or ToolBench's / Seal-Tools' tool fields), ``queries.jsonl`` (``_id``, ``text``, an
optional ``group``) and ``qrels/test.tsv`` (``query-id corpus-id score``, a header
line). Every method runs over the same documents and queries, BM25 among them:

* ``bm25``: BM25 over the enriched documents;
* ``dense-<model>-<document>``: exact cosine search, one per document variant;
* ``hybrid-<model>-<document>``: the dense ranking fused with BM25 (the shipped fusion);
* with ``--stages``, two more over the enriched documents: ``…+expansion`` (each tool's
  questions as extra rows, :mod:`retriever.expansion`) and ``…+rerank`` (the first
  stage's top 30 reordered by the late-interaction reranker, :mod:`retriever.rerank`).

Document vectors are cached on disk per model (``--cache-dir``), so a second run
embeds nothing it has embedded before.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import numpy as np
from pydantic import JsonValue

from retriever.config import DocumentVariant, RetrieverConfig
from retriever.documents import ToolDocument, corpus_fields, make_document
from retriever.embedder import Encoder, Vectors
from retriever.metrics import ndcg_at, recall_at

if TYPE_CHECKING:
    from proxy.config import Settings
    from retriever.index import Method, ToolIndex

COMMANDS = ("eval",)
VARIANTS: tuple[DocumentVariant, ...] = ("enriched", "name_description")


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    group: str


@dataclass
class BeirSet:
    corpus: list[dict[str, JsonValue]]
    queries: list[Query]
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)


def load_beir(folder: Path, limit_queries: int | None = None) -> BeirSet:
    corpus_path = next(
        (
            folder / name
            for name in ("corpus.jsonl", "corpus.jsonl.gz")
            if (folder / name).is_file()
        ),
        None,
    )
    if corpus_path is None:
        raise FileNotFoundError(f"{folder} has no corpus.jsonl")
    corpus = list(_json_lines(corpus_path))
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    with (folder / "qrels" / "test.tsv").open(encoding="utf-8") as lines:
        for number, line in enumerate(lines):
            parts = line.rstrip("\n").split("\t")
            if number == 0 and not parts[-1].lstrip("-").isdigit():
                continue  # the header
            if len(parts) >= 3 and int(parts[2]) > 0:
                qrels[parts[0]][parts[1]] = int(parts[2])
    queries = [
        Query(str(row["_id"]), str(row["text"]), _group(row))
        for row in _json_lines(folder / "queries.jsonl")
        if str(row["_id"]) in qrels
    ]
    return BeirSet(corpus, queries[:limit_queries] if limit_queries else queries, dict(qrels))


def _group(row: dict[str, JsonValue]) -> str:
    group = row.get("group")
    if isinstance(group, str) and group:
        return group
    query_id = str(row["_id"])
    return query_id.split(":", 1)[0] if ":" in query_id else "all"


def _json_lines(path: Path) -> Iterator[dict[str, JsonValue]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)


Scores = dict[str, dict[str, float]]  # group → metric → mean; "all" is every query


def score_runs(runs: dict[str, list[str]], data: BeirSet, ks: Sequence[int]) -> Scores:
    per_group: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for query in data.queries:
        ranked, relevant = runs[query.id], data.qrels[query.id]
        for k in ks:
            for group in ("all", query.group):
                per_group[group][f"ndcg@{k}"].append(ndcg_at(ranked, relevant, k))
                per_group[group][f"recall@{k}"].append(recall_at(ranked, relevant, k))
    return {
        group: {name: round(100 * float(np.mean(values)), 2) for name, values in metrics.items()}
        for group, metrics in per_group.items()
    }


def evaluate(
    data: BeirSet,
    encoder: Encoder | None,
    ks: Sequence[int],
    *,
    variants: Sequence[DocumentVariant] = VARIANTS,
    cache_dir: Path | None = None,
    progress: bool = True,
    config: RetrieverConfig | None = None,
    stages: bool = False,
) -> dict[str, Scores]:
    """Every method's scores; ``encoder=None`` runs BM25 alone. The index is built as the
    proxy builds it from ``config`` (fusion, BM25; unset, the defaults); with
    ``config.clauses`` a query's clauses are searched too."""
    from retriever.bulk import embed_documents
    from retriever.index import ToolIndex

    config = config or RetrieverConfig()
    depth = max(ks)
    texts = [query.text for query in data.queries]
    results: dict[str, Scores] = {}
    enriched = [make_document(corpus_fields(row), "enriched") for row in data.corpus]
    blank = np.zeros((len(enriched), 1), dtype=np.float32)
    lexical = ToolIndex.from_config(enriched, blank, config)
    results["bm25"] = score_runs(_run(lexical, None, texts, data, depth, "bm25"), data, ks)
    if encoder is None:
        return results
    query_vectors = _encode_queries(encoder, texts, clauses=config.clauses)
    model = _slug(encoder.name)
    for variant in variants:
        documents = (
            enriched
            if variant == "enriched"
            else [make_document(corpus_fields(row), variant) for row in data.corpus]
        )
        vectors = embed_documents(
            encoder,
            [doc.text for doc in documents],
            cache_dir=cache_dir,
            progress=progress,
            label=f"embedding {len(documents)} documents ({variant})",
        )
        index = ToolIndex.from_config(documents, vectors, config)
        for method in ("dense", "hybrid"):
            runs = _run(index, query_vectors, texts, data, depth, method)
            results[f"{method}-{model}-{variant}"] = score_runs(runs, data, ks)
        if stages and variant == "enriched":
            name = f"hybrid-{model}-{variant}"
            for stage, staged in _stages(data, documents, vectors, encoder, config, cache_dir):
                runs = _run(staged, query_vectors, texts, data, depth, "hybrid")
                results[f"{name}+{stage}"] = score_runs(runs, data, ks)
    return results


def _stages(
    data: BeirSet,
    documents: list[ToolDocument],
    vectors: Vectors,
    encoder: Encoder,
    config: RetrieverConfig,
    cache_dir: Path | None,
) -> Iterator[tuple[str, ToolIndex]]:
    """The first stage with expanded documents, then with the reranker."""
    from retriever.bulk import embed_documents
    from retriever.expansion import questions
    from retriever.index import ExtraRows, ToolIndex
    from retriever.rerank import load_reranker

    written = [questions(corpus_fields(row)) for row in data.corpus]
    extra = ExtraRows(
        embed_documents(
            encoder, [q for qs in written for q in qs], cache_dir=cache_dir, progress=False
        ),
        np.repeat(np.arange(len(written)), [len(qs) for qs in written]).astype(np.intp),
    )
    plain = config.model_copy(update={"rerank": False})
    yield "expansion", ToolIndex.from_config(documents, vectors, plain, extra=extra)
    reranker = load_reranker(config.model_copy(update={"rerank": True}))
    yield "rerank", ToolIndex.from_config(documents, vectors, plain, reranker=reranker)


def _run(
    index: ToolIndex,
    vectors: Sequence[Vectors] | None,
    texts: list[str],
    data: BeirSet,
    depth: int,
    method: Method,
) -> dict[str, list[str]]:
    return {
        query.id: [
            hit.id
            for hit in index.search(
                None if vectors is None else vectors[i], text, depth, method=method
            )
        ]
        for i, (query, text) in enumerate(zip(data.queries, texts, strict=True))
    }


def _encode_queries(encoder: Encoder, texts: list[str], *, clauses: bool) -> list[Vectors]:
    """Each query's rows: its vector, and with ``clauses`` its clauses' under it."""
    from retriever.clauses import split_clauses

    parts = [encoder.encode(texts[i : i + 64]) for i in range(0, len(texts), 64)]
    whole = list(np.concatenate(parts)) if parts else []
    if not clauses:
        return whole
    split = [split_clauses(text) for text in texts]
    return [
        np.vstack([row, encoder.encode(found)]) if found else row
        for row, found in zip(whole, split, strict=True)
    ]


def _slug(model_name: str) -> str:
    # "flag:model:mean" (the bundled folder is called "model") reads better as minilm;
    # "flag:model:mean+adapter-1a2b3c" (the learned adapter) as minilm-adapter.
    base, _, adapter = model_name.partition("+adapter")
    parts = [p for p in base.split(":")[1:2] if p and p != "model"]
    slug = re.sub(r"[^a-z0-9]+", "-", (parts[0] if parts else "minilm").lower()).strip("-")
    return f"{slug}-adapter" if adapter else slug


def format_report(results: dict[str, Scores], ks: Sequence[int]) -> str:
    columns = [f"ndcg@{k}" for k in ks] + [f"recall@{k}" for k in ks]
    groups = sorted({g for scores in results.values() for g in scores} - {"all"})
    lines = []
    for group in ["all", *groups]:
        lines.append(f"\n{group}" + ("" if group != "all" else " queries"))
        lines.append(f"  {'method':<44}" + "".join(f"{c:>11}" for c in columns))
        for method, scores in results.items():
            row = scores.get(group, {})
            lines.append(f"  {method:<44}" + "".join(f"{row.get(c, 0):>11.1f}" for c in columns))
    return "\n".join(lines).lstrip("\n")


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("eval", help="measure toolgraph's parts on public data")
    parser.set_defaults(host=None, port=None, workers=None)
    actions = parser.add_subparsers(dest="action", required=True)
    retrieval = actions.add_parser("retrieval", help="Recall@k and NDCG@k on a BEIR folder")
    retrieval.add_argument("--config", type=Path, help="YAML settings file")
    retrieval.add_argument("--corpus", type=Path, required=True, help="the BEIR folder")
    retrieval.add_argument("--k", default="1,5,10", help="cut-offs, comma-separated")
    retrieval.add_argument("--json", type=Path, help="write the scores here as JSON")
    retrieval.add_argument("--bm25-only", action="store_true", help="skip the embedding model")
    retrieval.add_argument(
        "--documents",
        default=",".join(VARIANTS),
        help="document variants to embed, comma-separated (enriched,name_description)",
    )
    retrieval.add_argument("--limit-queries", type=int, help="the first N queries only")
    retrieval.add_argument("--cache-dir", type=Path, help="document vectors (data_dir/embeddings)")
    retrieval.add_argument("--quiet", action="store_true", help="no progress bars")
    retrieval.add_argument(
        "--stages",
        action="store_true",
        help="also the first stage with expanded documents and with the reranker",
    )


def parse_ks(text: str) -> list[int] | None:
    """``--k 1,5,10`` as sorted list sizes, or None after saying on stderr what is wrong."""
    try:
        ks = sorted({int(k) for k in text.split(",") if k.strip()})
        if not ks or ks[0] < 1:
            raise ValueError
    except ValueError:
        print(f"toolgraph: --k must be positive integers, got {text!r}", file=sys.stderr)
        return None
    return ks


def run_command(args: argparse.Namespace, settings: Settings, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    ks = parse_ks(args.k)
    if ks is None:
        return 2
    try:
        data = load_beir(args.corpus, args.limit_queries)
    except (OSError, KeyError, ValueError) as exc:
        print(f"toolgraph: cannot read the BEIR folder {args.corpus}: {exc}", file=sys.stderr)
        return 2
    variants = [v.strip() for v in args.documents.split(",") if v.strip()]
    if not set(variants) <= set(VARIANTS):
        print(f"toolgraph: --documents must name {', '.join(VARIANTS)}", file=sys.stderr)
        return 2
    encoder = None if args.bm25_only else _encoder(settings.retriever)
    started = time.perf_counter()
    results = evaluate(
        data,
        encoder,
        ks,
        variants=variants,
        cache_dir=args.cache_dir or settings.data_dir / "embeddings",
        progress=not args.quiet,
        config=settings.retriever,
        stages=args.stages,
    )
    print(
        f"{len(data.queries)} queries, {len(data.corpus)} documents, "
        f"{time.perf_counter() - started:.0f} s\n{format_report(results, ks)}",
        file=out,
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        report = {
            method: {**scores["all"], "by_group": {g: s for g, s in scores.items() if g != "all"}}
            for method, scores in results.items()
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


def _encoder(config: RetrieverConfig) -> Encoder:
    from retriever.embedder import load_encoder

    return load_encoder(config)
