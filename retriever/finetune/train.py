"""Fine-tune an encoder on (query, relevant tool) pairs, as the thesis did for BGE-M3.

Loss: InfoNCE over the batch. Each query's positive is its tool document; the other
queries' positives are in-batch negatives, and each query brings ``hard_negatives``
documents mined from the index (the nearest tools that are not relevant) or written
by an LLM as near misses. A document is scored once per batch however many examples
bring it, and every document relevant to a query (its pair's and its other pairs' in
the batch) counts as a positive for it: with few tools and many queries (SGD: 88 tools,
40,865 pairs) most batches hold one tool several times, and without this the copies
would be each other's negatives. One epoch at 3e-5 is the thesis's setting;
``max_steps`` caps it. Runs on CUDA when present; the model is saved as a plain
Hugging Face folder that ``retriever.model_path`` loads.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from retriever.embedder import MAX_TOKENS, Encoder
from retriever.errors import ModelNotFound


@dataclass(frozen=True)
class Example:
    query: str
    positive: str
    negatives: tuple[str, ...] = ()


@dataclass
class TrainReport:
    losses: list[float] = field(default_factory=list)
    steps: int = 0
    seconds: float = 0.0  # the training steps only, not loading or saving
    cpu_seconds: float = 0.0  # the same steps' CPU time, all threads: the cost on a shared machine
    out: Path | None = None


def batch_targets(batch: Sequence[Example]) -> tuple[list[str], list[list[bool]]]:
    """The batch's documents, each once, and for each example which of them are relevant
    to its query (its positive, and the positive of any example with the same query)."""
    documents = list(dict.fromkeys(d for e in batch for d in (e.positive, *e.negatives)))
    relevant: dict[str, set[str]] = {}
    for example in batch:
        relevant.setdefault(example.query, set()).add(example.positive)
    return documents, [[d in relevant[e.query] for d in documents] for e in batch]


def mine_hard_negatives(
    encoder: Encoder,
    examples: Sequence[Example],
    corpus: Sequence[str],
    per_query: int = 3,
    skip_top: int = 0,
) -> list[Example]:
    """Each example with the ``per_query`` nearest corpus texts that are relevant to none of
    its query's examples (after skipping the ``skip_top`` nearest, which are often
    unlabelled positives): a query needing two tools has two examples, and each tool
    must not be the other's negative."""
    from retriever.bulk import embed_documents

    relevant: dict[str, set[str]] = {}
    for example in examples:
        relevant.setdefault(example.query, set()).add(example.positive)
    doc_vectors = embed_documents(encoder, list(corpus), progress=False)
    query_vectors = embed_documents(encoder, [e.query for e in examples], progress=False)
    mined = []
    for example, scores in zip(examples, query_vectors @ doc_vectors.T, strict=True):
        order = np.argsort(-scores, kind="stable")
        near = [corpus[i] for i in order if corpus[i] not in relevant[example.query]][skip_top:]
        mined.append(Example(example.query, example.positive, tuple(near[:per_query])))
    return mined


def train(
    examples: Sequence[Example],
    model_path: Path,
    out: Path,
    *,
    epochs: int = 1,
    learning_rate: float = 3e-5,
    batch_size: int = 16,
    temperature: float = 0.05,
    seed: int = 0,
    max_steps: int | None = None,
) -> TrainReport:
    if not (model_path / "config.json").is_file():
        raise ModelNotFound(f"no model to fine-tune at {model_path}")
    os.environ["HF_HUB_OFFLINE"] = "1"
    import torch
    from transformers import AutoModel, AutoTokenizer

    random.seed(seed)
    torch.manual_seed(seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(str(model_path))
    model = AutoModel.from_pretrained(str(model_path)).to(device).train()
    optimiser = torch.optim.AdamW(model.parameters(), lr=learning_rate)

    def embed(texts: list[str]) -> torch.Tensor:
        batch = tokenizer(
            texts, padding=True, truncation=True, max_length=MAX_TOKENS, return_tensors="pt"
        ).to(device)
        hidden = model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).float()
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, dim=-1)

    report = TrainReport()
    started, cpu_started = time.perf_counter(), time.process_time()
    for batch in _batches(list(examples), epochs, batch_size, max_steps):
        documents, relevant = batch_targets(batch)
        logits = embed([e.query for e in batch]) @ embed(documents).T / temperature
        positives = logits.masked_fill(~torch.tensor(relevant, device=device), float("-inf"))
        loss = (torch.logsumexp(logits, dim=1) - torch.logsumexp(positives, dim=1)).mean()
        optimiser.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        optimiser.step()
        report.losses.append(float(loss.detach()))
        report.steps += 1
    report.seconds = time.perf_counter() - started
    report.cpu_seconds = time.process_time() - cpu_started
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    report.out = out
    return report


def _batches(
    examples: list[Example], epochs: int, batch_size: int, max_steps: int | None
) -> list[list[Example]]:
    """Each epoch's shuffled batches, in order, the first ``max_steps`` of them."""
    batches = []
    for _ in range(epochs):
        random.shuffle(examples)
        batches += [examples[i : i + batch_size] for i in range(0, len(examples), batch_size)]
    return batches[:max_steps]
