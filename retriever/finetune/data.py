"""The training sets (../shared/data/train) as embedded queries and tools.

Each retrieval folder becomes a :class:`EmbeddedSet`: its tools' enriched documents and
its queries, embedded once with the frozen base encoder and cached on disk (the
encoder is frozen, so the adapter trains on these vectors and never runs the network),
the relevant tools of each query (``qrels/train.tsv``) and its BM25 hard negatives
(``hard_negatives.jsonl`` where the folder has one).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import JsonValue

from retriever.bulk import embed_documents
from retriever.documents import corpus_fields, make_document
from retriever.embedder import Encoder, Vectors

#: The eight retrieval sets of train/README.md, in the order they are reported.
TRAIN_SETS = (
    "sgd",
    "gorilla_apibench",
    "gorilla_apizoo",
    "callnavi",
    "api_bank",
    "toolalpaca",
    "tooleyes",
    "tooltalk",
)

#: Most queries kept per set (SGD has 17k stand-alone ones, API-Bank 261): a cap keeps
#: one big set from deciding what the adapter learns.
MAX_QUERIES = 1000

#: Most tools kept per set: the relevant ones and their hard negatives first, then a
#: seeded sample of the rest. Only API Zoo is cut (4,381 tools, 513 of them ever
#: relevant): its long documents cost most of an hour to embed on two shared cores.
MAX_TOOLS = 1200

#: BM25 hard negatives kept per query (the nearest first; the files hold up to 10).
HARD_NEGATIVES = 3


@dataclass
class EmbeddedSet:
    name: str
    doc_ids: list[str]
    doc_texts: list[str]
    doc_keys: list[str]  # functional duplicates share a key (never each other's negative)
    doc_vectors: Vectors
    query_ids: list[str]
    query_texts: list[str]
    query_vectors: Vectors
    positives: list[list[int]]  # per query, rows of doc_* that are relevant
    negatives: list[list[int]]  # per query, rows of BM25 hard negatives


@dataclass
class TrainingSet:
    """One training folder's kept tools and queries, before any embedding."""

    name: str
    doc_ids: list[str]
    doc_texts: list[str]
    doc_keys: list[str]  # functional duplicates share a key (never each other's negative)
    query_ids: list[str]
    query_texts: list[str]
    positives: list[list[int]]  # per query, rows of doc_* that are relevant
    negatives: list[list[int]]  # per query, rows of BM25 hard negatives


def read_set(
    folder: Path,
    *,
    max_queries: int = MAX_QUERIES,
    max_tools: int = MAX_TOOLS,
    seed: int = 0,
) -> TrainingSet:
    """One training folder, its queries sampled down to ``max_queries`` and its tools to
    ``max_tools`` (seeded)."""
    rows = list(_json_lines(folder / "corpus.jsonl"))
    qrels = _qrels(folder / "qrels" / "train.tsv")
    queries = [
        (str(row["_id"]), str(row["text"]))
        for row in _json_lines(folder / "queries.jsonl")
        if str(row["_id"]) in qrels and _stand_alone(folder.name, row)
    ]
    if len(queries) > max_queries:
        queries = sorted(random.Random(seed).sample(queries, max_queries))
    hard_ids = _hard_negatives(folder / "hard_negatives.jsonl")
    needed = {d for q, _ in queries for d in (*qrels[q], *hard_ids.get(q, []))}
    rows = _cap_tools(rows, needed, max_tools, seed)
    doc_ids = [str(row["_id"]) for row in rows]
    row_of = {doc_id: i for i, doc_id in enumerate(doc_ids)}
    relevant = {q: {row_of[d] for d in docs if d in row_of} for q, docs in qrels.items()}
    hard = {q: [row_of[d] for d in docs if d in row_of] for q, docs in hard_ids.items()}
    return TrainingSet(
        name=folder.name,
        doc_ids=doc_ids,
        doc_texts=[make_document(corpus_fields(row)).text for row in rows],
        doc_keys=[_duplicate_key(folder.name, row) for row in rows],
        query_ids=[query_id for query_id, _ in queries],
        query_texts=[text for _, text in queries],
        positives=[sorted(relevant[query_id]) for query_id, _ in queries],
        negatives=[hard.get(query_id, []) for query_id, _ in queries],
    )


def load_set(
    folder: Path,
    encoder: Encoder,
    *,
    cache_dir: Path | None,
    max_queries: int = MAX_QUERIES,
    max_tools: int = MAX_TOOLS,
    seed: int = 0,
    progress: bool = True,
) -> EmbeddedSet:
    """:func:`read_set`, its tools and queries embedded with ``encoder`` (cached)."""
    raw = read_set(folder, max_queries=max_queries, max_tools=max_tools, seed=seed)
    label = f"{folder.name}: embedding"
    doc_vectors = embed_documents(
        encoder, raw.doc_texts, cache_dir=cache_dir, progress=progress, label=f"{label} tools"
    )
    query_vectors = embed_documents(
        encoder,
        raw.query_texts,
        cache_dir=cache_dir,
        progress=progress,
        label=f"{label} queries",
    )
    return EmbeddedSet(
        name=raw.name,
        doc_ids=raw.doc_ids,
        doc_texts=raw.doc_texts,
        doc_keys=raw.doc_keys,
        doc_vectors=doc_vectors,
        query_ids=raw.query_ids,
        query_texts=raw.query_texts,
        query_vectors=query_vectors,
        positives=raw.positives,
        negatives=raw.negatives,
    )


def _stand_alone(dataset: str, row: dict[str, JsonValue]) -> bool:
    # SGD's follow-up turns ("Yes, book it.") name no tool on their own.
    return dataset != "sgd" or row.get("first_user_turn") is True


def _duplicate_key(dataset: str, row: dict[str, JsonValue]) -> str:
    # SGD: the same intent in another service of the same domain serves the query too.
    if dataset == "sgd":
        return f"{row.get('domain')}.{row.get('name')}"
    return str(row["_id"])


def _cap_tools(
    rows: list[dict[str, JsonValue]], needed: set[str], max_tools: int, seed: int
) -> list[dict[str, JsonValue]]:
    if len(rows) <= max_tools:
        return rows
    others = [i for i, row in enumerate(rows) if str(row["_id"]) not in needed]
    room = max(0, max_tools - (len(rows) - len(others)))
    kept = set(random.Random(seed).sample(others, min(room, len(others))))
    return [row for i, row in enumerate(rows) if str(row["_id"]) in needed or i in kept]


def _qrels(path: Path) -> dict[str, set[str]]:
    relevant: dict[str, set[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        query_id, doc_id, score = line.split("\t")[:3]
        if int(score) > 0:
            relevant.setdefault(query_id, set()).add(doc_id)
    return relevant


def _hard_negatives(path: Path) -> dict[str, list[str]]:
    if not path.is_file():
        return {}
    return {
        str(row["query-id"]): [str(d) for d in _list(row["negatives"])][:HARD_NEGATIVES]
        for row in _json_lines(path)
    }


def _json_lines(path: Path) -> Iterator[dict[str, JsonValue]]:
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)


def _list(value: JsonValue) -> list[JsonValue]:
    return value if isinstance(value, list) else []
