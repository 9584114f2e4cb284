"""The gate on broad catalogs that nothing was fitted on: toolbench_stable's APIs.

No training row comes from toolbench_stable (its queries and APIs are the retrieval
table's unseen set), so its broad catalogs test how the gate reads a catalog of
hundreds of tools across many domains. :data:`CATALOGS` catalogs of :data:`SIZE`
APIs each: the relevant APIs of seeded test queries (up to :data:`GOLD` of them) and
APIs drawn across the corpus's categories. Half the rows are those queries against
their catalog ("needs a tool"); the other half are requests of one "no tool" source
(chit-chat, NQ-open, templates), as many, each against one of the catalogs ("needs
none"). ``eval.gate_report --broad`` scores each half with the gate fitted without that
"no tool" source, its threshold chosen without it, so nothing of either half was fitted
on or chose anything.
"""

from __future__ import annotations

import random
from pathlib import Path

from eval.retrieval import load_beir
from retriever.documents import corpus_fields
from retriever.gate.data import GateRow
from retriever.gate.features import gate_document

#: Catalogs, their size and the most relevant APIs (of their queries) each holds.
CATALOGS = 3
SIZE = 200
GOLD = 120
#: The "no tool" sources the test is made with (each scored by the gate without it).
NO_TOOL = ("chitchat", "nq_open", "templates")


def broad_catalogs(folder: Path, seed: int = 0) -> list[tuple[tuple[str, ...], list[str]]]:
    """:data:`CATALOGS` ``(documents, queries)``: each catalog's APIs and the queries
    whose relevant APIs it holds."""
    data = load_beir(folder)
    draw = random.Random(f"{seed}:broad")
    queries = list(data.queries)
    draw.shuffle(queries)
    by_id = {str(record["_id"]): record for record in data.corpus}
    by_category: dict[str, list[str]] = {}
    for record in data.corpus:
        by_category.setdefault(str(record.get("category", "")), []).append(str(record["_id"]))
    made = []
    for _ in range(CATALOGS):
        gold: dict[str, None] = {}
        asked: list[str] = []
        while queries and len(gold) + len(data.qrels[queries[-1].id]) <= GOLD:
            query = queries.pop()
            gold.update(dict.fromkeys(d for d in data.qrels[query.id] if d in by_id))
            asked.append(query.text)
        chosen = dict(gold)
        categories = sorted(by_category)
        while len(chosen) < SIZE:
            chosen.setdefault(draw.choice(by_category[draw.choice(categories)]), None)
        documents = tuple(gate_document(corpus_fields(by_id[d])) for d in chosen)
        made.append((documents, asked))
    return made


def broad_rows(
    catalogs: list[tuple[tuple[str, ...], list[str]]], no_tool: list[GateRow], seed: int = 0
) -> list[GateRow]:
    """Each catalog's queries against it, and as many of ``no_tool``'s requests (drawn
    with ``seed``), spread over the catalogs."""
    rows = [
        GateRow(f"broad:{i}:{j}", "broad", "tool_call", text, True, documents)
        for i, (documents, asked) in enumerate(catalogs)
        for j, text in enumerate(asked)
    ]
    draw = random.Random(f"{seed}:broad:none")
    picked = draw.sample(no_tool, min(len(rows), len(no_tool)))
    for i, row in enumerate(picked):
        documents = catalogs[i % len(catalogs)][0]
        rows.append(GateRow(row.id, "broad", row.source, row.query, False, documents))
    return rows
