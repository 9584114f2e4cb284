"""What the catalog's question rows (``retriever.expand_documents``) cost on this CPU.

* index build: toolbench_stable's first ``--tools`` tools synced into an empty local
  Qdrant collection as the proxy's catalog does it (documents, then with expansion each
  tool's questions beside them; no embedding cache), and the same import again, which
  embeds nothing;
* search: every hybrid search of ``--queries`` of its queries (the whole text and its
  clauses, as the catalog searches) over the index loaded back from Qdrant, without and
  with the question rows, p50 of the added time, top 30 as orchestrate's lists read.

One onnxruntime thread, the load average before and after::

    nice -n 10 python -m eval.bench_expansion --json eval/results/bench_expansion.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from qdrant_client import QdrantClient

from eval.data_folder import dataset
from retriever.bulk import embed_documents
from retriever.catalog import load_index, questions_of
from retriever.clauses import query_rows
from retriever.config import RetrieverConfig
from retriever.documents import corpus_fields, make_document
from retriever.embedder import Encoder, Vectors, load_encoder
from retriever.index import RERANK_DEPTH, ToolIndex
from retriever.owned_client import OwnedClient
from retriever.qdrant_store import QdrantCatalog
from retriever.question_store import written_questions


def _seconds_per_1000(seconds: float, tools: int) -> float:
    return round(1000 * seconds / tools, 2)


def build(fields: list[Any], encoder: Encoder, folder: Path) -> dict[str, Any]:
    """Sync the tools, then their questions, twice each; seconds per 1,000 tools."""
    client = OwnedClient(QdrantClient(path=str(folder)))
    catalog = QdrantCatalog(client, "tools-bench", encoder.dim)
    documents = [make_document(f) for f in fields]

    def embed(texts: list[str]) -> Vectors:
        return embed_documents(encoder, texts, progress=False)

    result: dict[str, Any] = {"tools": len(fields)}
    for label in ("first import", "second import"):
        started = time.perf_counter()
        report = catalog.sync(documents, embed)
        documents_s = time.perf_counter() - started
        started = time.perf_counter()
        wanted = written_questions(fields)
        written_s = time.perf_counter() - started
        changed = questions_of(catalog).sync(wanted, embed)
        questions_s = time.perf_counter() - started
        result[label] = {
            "documents_s_per_1000": _seconds_per_1000(documents_s, len(fields)),
            "documents_embedded": report.added + report.updated,
            "questions_written_s_per_1000": _seconds_per_1000(written_s, len(fields)),
            "questions_s_per_1000": _seconds_per_1000(questions_s, len(fields)),
            "tools_whose_questions_were_embedded": changed,
            "questions_per_tool": round(sum(len(q.texts) for q in wanted) / len(fields), 2),
        }
    started = time.perf_counter()
    plain = load_index(catalog, RetrieverConfig())
    result["load_s_per_1000"] = _seconds_per_1000(time.perf_counter() - started, len(fields))
    started = time.perf_counter()
    expanded = load_index(catalog, RetrieverConfig(expand_documents=True))
    result["load_expanded_s_per_1000"] = _seconds_per_1000(
        time.perf_counter() - started, len(fields)
    )
    client.close()
    result["indexes"] = (plain, expanded)
    return result


def search(
    plain: ToolIndex, expanded: ToolIndex, encoder: Encoder, queries: list[str]
) -> dict[str, Any]:
    """p50 of each search, and of what the question rows add (interleaved per query)."""
    times: dict[str, list[float]] = {"plain": [], "expanded": []}
    rows_per_query = []
    for text in queries:
        rows = query_rows(encoder, text)
        rows_per_query.append(len(np.atleast_2d(rows)))
        for label, index in (("plain", plain), ("expanded", expanded)):
            started = time.perf_counter()
            index.search(rows, text, RERANK_DEPTH)
            times[label].append(time.perf_counter() - started)
    added = np.asarray(times["expanded"]) - np.asarray(times["plain"])
    extra = expanded.extra
    return {
        "tools": len(plain),
        "question_rows": 0 if extra is None else len(extra.owners),
        "query_rows_mean": round(float(np.mean(rows_per_query)), 2),
        "search_p50_ms": round(1000 * float(np.median(times["plain"])), 2),
        "expanded_search_p50_ms": round(1000 * float(np.median(times["expanded"])), 2),
        "added_p50_ms": round(1000 * float(np.median(added)), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=dataset("toolbench_stable"))
    parser.add_argument("--tools", type=int, default=1000)
    parser.add_argument("--search-tools", type=int, default=2425)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with gzip.open(args.data / "corpus.jsonl.gz", "rt", encoding="utf-8") as lines:
        rows = [json.loads(line) for _, line in zip(range(args.search_tools), lines, strict=False)]
    fields = [corpus_fields(row) for row in rows]
    queries = [
        json.loads(line)["text"]
        for line in (args.data / "queries.jsonl").read_text().splitlines()[: args.queries]
    ]
    encoder = load_encoder(RetrieverConfig(cpu_threads=1))
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as folder:
        timed = build(fields[: args.tools], encoder, Path(folder) / "built")
        timed.pop("indexes")
        load_built = os.getloadavg()[0]
        # the search's catalog: every tool read, embeddings from the disk cache beside it
        whole = build(fields, encoder, Path(folder) / "whole")
        plain, expanded = whole.pop("indexes")
    report = {
        "build": timed,
        "build_load_average": [round(load_before, 2), round(load_built, 2)],
        "search": search(plain, expanded, encoder, queries),
        "search_load_average": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
