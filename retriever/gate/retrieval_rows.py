"""Tool requests from the eight retrieval training sets, each against a catalog of its own.

The gate sources hold tool requests against four kinds of catalog (BFCL's, ACEBench's,
When2Call's functions and CLINC150's intents); a gate fitted on them alone learned what
those requests look like and sent every request to the tools on a catalog it had never
seen. The retrieval sets (``train/<name>``, BEIR-like) bring eight more: every sampled
query is a request one of its set's tools serves. Each set gives:

* ``tool_call`` rows: the query against its set's catalog (the gold tools of the sampled
  queries, filled with other tools of the set up to :data:`CATALOG_SIZE`);
* ``other_catalog`` rows, labelled "no tool": the same number of the set's queries
  against another source's catalog (a BFCL, ACEBench or When2Call function list, or
  another retrieval set's catalog), so the decision depends on the catalog: a weather
  request needs no tool of a catalog without weather tools. CLINC150's broad intent
  catalogue is never drawn (it serves many of these requests); a few drawn catalogs
  may still hold a tool that would serve (noise, weighing like any row).

SGD keeps only the first user turn of a dialogue ("Yes, book it." needs its context).
"""

from __future__ import annotations

import csv
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from retriever.documents import corpus_fields
from retriever.gate.features import gate_document

#: The retrieval training sets, in the order the report lists them.
RETRIEVAL_SOURCES = (
    "sgd",
    "gorilla_apibench",
    "gorilla_apizoo",
    "callnavi",
    "api_bank",
    "toolalpaca",
    "tooleyes",
    "tooltalk",
)
#: Queries drawn per set (seeded): as many as the smaller gate sources hold.
QUERIES = 200
#: Tools of a set's catalog at most (the unseen tool-awareness set offers about 200).
CATALOG_SIZE = 200


def retrieval_catalogs(
    root: Path, seed: int
) -> dict[str, tuple[tuple[str, ...], list[tuple[str, str]]]]:
    """Each set's catalog (tool documents) and its drawn queries as ``(id, text)``."""
    return {source: (catalog, picked) for source, catalog, picked, _ in _drawn(root, seed)}


def retrieval_gold(root: Path, seed: int) -> dict[tuple[str, str], tuple[str, ...]]:
    """``(set, query id)`` of every drawn query → the documents of its gold tools."""
    return {
        (source, qid): documents
        for source, _, _, gold in _drawn(root, seed)
        for qid, documents in gold.items()
    }


def _drawn(
    root: Path, seed: int
) -> Iterator[tuple[str, tuple[str, ...], list[tuple[str, str]], dict[str, tuple[str, ...]]]]:
    """Each set's catalog, its drawn queries and their gold tools' documents."""
    for source in RETRIEVAL_SOURCES:
        folder = root / source
        gold = _qrels(folder / "qrels" / "train.tsv")
        draw = random.Random(f"{seed}:{source}")
        queries = [q for q in _lines(folder / "queries.jsonl") if _usable(q, gold)]
        draw.shuffle(queries)
        picked = [(str(q["_id"]), str(q["text"])) for q in queries[:QUERIES]]
        tools = {
            str(t["_id"]): gate_document(corpus_fields(t)) for t in _lines(folder / "corpus.jsonl")
        }
        needed = sorted({t for qid, _ in picked for t in gold[qid] if t in tools})
        others = sorted(set(tools) - set(needed))
        draw.shuffle(others)
        chosen = needed + others[: max(0, CATALOG_SIZE - len(needed))]
        golds = {qid: tuple(tools[t] for t in gold[qid] if t in tools) for qid, _ in picked}
        yield source, tuple(tools[t] for t in sorted(chosen)), picked, golds


def retrieval_rows(
    root: Path, swap_pool: list[tuple[str, ...]], seed: int
) -> Iterator[tuple[str, str, str, str, bool, tuple[str, ...]]]:
    """``(id, source, category, query, needs_tool, catalog)`` of every set: its queries
    against its catalog, and again against a catalog drawn from ``swap_pool`` or
    another set's (labelled "no tool")."""
    catalogs = retrieval_catalogs(root, seed)
    for source, (catalog, queries) in catalogs.items():
        draw = random.Random(f"{seed}:{source}:swap")
        elsewhere = swap_pool + [c for s, (c, _) in catalogs.items() if s != source]
        for qid, text in queries:
            yield qid, source, "tool_call", text, True, catalog
            yield f"{qid}#other", source, "other_catalog", text, False, draw.choice(elsewhere)


def _usable(query: dict[str, Any], gold: dict[str, list[str]]) -> bool:
    if str(query["_id"]) not in gold or not str(query.get("text", "")).strip():
        return False
    return query.get("first_user_turn", True) is not False


def _qrels(path: Path) -> dict[str, list[str]]:
    gold: dict[str, list[str]] = {}
    with path.open(encoding="utf-8") as lines:
        for row in csv.DictReader(lines, delimiter="\t"):
            if int(row["score"]) > 0:
                gold.setdefault(row["query-id"], []).append(row["corpus-id"])
    return gold


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)
