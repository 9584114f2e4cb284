"""``python -m retriever.finetune --corpus DIR --out DIR``: fine-tune on a BEIR folder.

Pairs come from ``qrels/<split>.tsv`` (default ``train``: never train on the split you
report), documents are the enriched tool texts, hard negatives are mined with the
model being tuned.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

from retriever.config import RetrieverConfig
from retriever.documents import corpus_fields, make_document
from retriever.embedder import bundled_model_path, load_encoder
from retriever.finetune.train import Example, mine_hard_negatives, train


def read_examples(folder: Path, split: str) -> tuple[list[Example], list[str]]:
    corpus_file = folder / "corpus.jsonl"
    opener = open if corpus_file.is_file() else gzip.open
    path = corpus_file if corpus_file.is_file() else folder / "corpus.jsonl.gz"
    with opener(path, "rt", encoding="utf-8") as lines:
        texts = {
            str(row["_id"]): make_document(corpus_fields(row)).text
            for row in map(json.loads, filter(str.strip, lines))
        }
    queries = {
        str(row["_id"]): str(row["text"])
        for row in map(json.loads, (folder / "queries.jsonl").read_text().splitlines())
    }
    examples = []
    for line in (folder / "qrels" / f"{split}.tsv").read_text().splitlines()[1:]:
        query_id, doc_id, score = line.split("\t")[:3]
        if int(score) > 0 and query_id in queries and doc_id in texts:
            examples.append(Example(queries[query_id], texts[doc_id]))
    return examples, list(texts.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--split", default="train")
    parser.add_argument("--model", type=Path, default=None, help="start model (bundled MiniLM)")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--hard-negatives", type=int, default=3)
    parser.add_argument(
        "--max-steps", type=int, default=None, help="stop after this many batches (a trial run)"
    )
    args = parser.parse_args()
    examples, corpus = read_examples(args.corpus, args.split)
    if not examples:
        raise SystemExit(f"no training pairs in {args.corpus} (qrels/{args.split}.tsv)")
    model = args.model or bundled_model_path()
    if args.hard_negatives:
        encoder = load_encoder(RetrieverConfig(model_path=model))
        examples = mine_hard_negatives(encoder, examples, corpus, args.hard_negatives, skip_top=3)
    report = train(
        examples,
        model,
        args.out,
        epochs=args.epochs,
        learning_rate=args.lr,
        batch_size=args.batch_size,
        max_steps=args.max_steps,
    )
    print(
        f"{report.steps} steps in {report.seconds:.0f} s ({report.seconds / report.steps:.1f} s, "
        f"{report.cpu_seconds / report.steps:.1f} CPU s a step), "
        f"loss {report.losses[0]:.3f} → {report.losses[-1]:.3f}: {args.out}"
    )


if __name__ == "__main__":
    main()
