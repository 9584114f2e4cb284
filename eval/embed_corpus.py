"""Embed a BEIR corpus into the embeddings cache in ``--sample`` order.

The relevant documents first, then the others in the seeded random order that
:func:`eval.retrieval_learned._embedded_sample` reads back, in chunks saved as they
finish: stopped at any point, the cache holds a uniform sample of the distractors
(``python -m eval.retrieval_learned --unseen --sample`` scores it), and finished, it
holds the whole corpus, so ``toolgraph eval retrieval`` on the same folder embeds
nothing more. ``toolgraph eval retrieval`` alone embeds shortest-first, which leaves
a biased subset when it is stopped early.

    nice -n 5 python -m eval.embed_corpus ../shared/data/toolbench_stable
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

from eval.retrieval import load_beir
from retriever.bulk import DiskCache, embed_documents, text_key
from retriever.config import RetrieverConfig
from retriever.documents import ToolDocument, corpus_fields, make_document
from retriever.embedder import load_encoder


def sample_order(folder: Path) -> list[ToolDocument]:
    """The corpus's enriched documents, relevant ones first, then the seeded order."""
    data = load_beir(folder)
    documents = [make_document(corpus_fields(row)) for row in data.corpus]
    relevant = {doc for docs in data.qrels.values() for doc in docs}
    rest = [doc for doc in documents if doc.id not in relevant]
    random.Random(0).shuffle(rest)  # the order _embedded_sample reads back
    return [doc for doc in documents if doc.id in relevant] + rest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path, help="the BEIR folder")
    parser.add_argument("--cache-dir", type=Path, default=Path(".cache/retriever/embeddings"))
    parser.add_argument("--chunk", type=int, default=1024, help="documents saved at a time")
    parser.add_argument("--threads", type=int, default=2, help="onnxruntime threads")
    args = parser.parse_args()
    encoder = load_encoder(RetrieverConfig(adapter=False, cpu_threads=args.threads))
    documents = sample_order(args.corpus)
    cached = DiskCache(args.cache_dir, encoder.name).vectors
    todo = [doc.text for doc in documents if text_key(doc.text) not in cached]
    started, total = time.perf_counter(), len(todo)
    print(f"{len(documents) - total} of {len(documents)} documents already cached", flush=True)
    for start in range(0, total, args.chunk):
        embed_documents(
            encoder, todo[start : start + args.chunk], cache_dir=args.cache_dir, progress=False
        )
        done = min(start + args.chunk, total)
        rate = done / (time.perf_counter() - started)
        print(
            f"{done}/{total} embedded, {rate:.1f} docs/s, "
            f"about {(total - done) / rate / 60:.0f} min left",
            flush=True,
        )


if __name__ == "__main__":
    main()
