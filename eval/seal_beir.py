"""Seal-Tools as a BEIR folder, for ``toolgraph eval retrieval``.

Corpus: the 4,076 tools of ``tool.jsonl.gz`` (``_id`` = the API name, with their own
fields). Queries: ``test_in_domain`` and ``test_out_domain``, grouped by split and
difficulty (``in_domain-easy``…); relevant: every API the gold ``calling`` list uses.

    python -m eval.seal_beir ../shared/data/extras/seal_tools .cache/retriever/seal_beir
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path


def convert(source: Path, target: Path) -> tuple[int, int, int]:
    (target / "qrels").mkdir(parents=True, exist_ok=True)
    names: set[str] = set()
    with (
        gzip.open(source / "tool.jsonl.gz", "rt", encoding="utf-8") as tools,
        (target / "corpus.jsonl").open("w", encoding="utf-8") as corpus,
    ):
        for line in tools:
            row = json.loads(line)
            if row["api_name"] in names:
                continue
            names.add(row["api_name"])
            corpus.write(json.dumps({"_id": row["api_name"], **row}) + "\n")
    queries, pairs = 0, 0
    with (
        (target / "queries.jsonl").open("w", encoding="utf-8") as out,
        (target / "qrels" / "test.tsv").open("w", encoding="utf-8") as qrels,
    ):
        qrels.write("query-id\tcorpus-id\tscore\n")
        for split in ("test_in_domain", "test_out_domain"):
            for line in (source / f"{split}.jsonl").read_text(encoding="utf-8").splitlines():
                row = json.loads(line)
                relevant = sorted({c["api"] for c in row["calling"] if c["api"] in names})
                if not relevant:
                    continue
                level = row["id"].split("-")[1] if row["id"].count("-") >= 2 else "all"
                group = f"{split.removeprefix('test_')}-{level}"
                out.write(json.dumps({"_id": row["id"], "text": row["query"], "group": group}))
                out.write("\n")
                qrels.writelines(f"{row['id']}\t{api}\t1\n" for api in relevant)
                queries += 1
                pairs += len(relevant)
    return len(names), queries, pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("target", type=Path)
    args = parser.parse_args()
    tools, queries, pairs = convert(args.source, args.target)
    print(f"{tools} tools, {queries} queries, {pairs} relevant pairs → {args.target}")


if __name__ == "__main__":
    main()
