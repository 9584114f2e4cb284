"""Fine-tune an encoder on (query, relevant tool) pairs, as the thesis did for BGE-M3.

Loss: InfoNCE over the batch. Each query's positive is its tool document; the other
queries' positives are in-batch negatives, and each query brings ``hard_negatives``
documents mined from the index (the nearest tools that are not relevant) or written
by an LLM as near misses. One epoch at 3e-5 is the thesis's setting. Runs on CUDA
when present; the model is saved as a plain Hugging Face folder that
``retriever.model_path`` loads.
"""

from __future__ import annotations

import os
import random
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
    out: Path | None = None


def mine_hard_negatives(
    encoder: Encoder,
    examples: Sequence[Example],
    corpus: Sequence[str],
    per_query: int = 3,
    skip_top: int = 0,
) -> list[Example]:
    """Each example with the ``per_query`` nearest corpus texts that are not its positive
    (after skipping the ``skip_top`` nearest, which are often unlabelled positives)."""
    from retriever.bulk import embed_documents

    doc_vectors = embed_documents(encoder, list(corpus), progress=False)
    query_vectors = embed_documents(encoder, [e.query for e in examples], progress=False)
    mined = []
    for example, scores in zip(examples, query_vectors @ doc_vectors.T, strict=True):
        order = np.argsort(-scores, kind="stable")
        near = [corpus[i] for i in order if corpus[i] != example.positive][skip_top:]
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
    order = list(examples)
    for _ in range(epochs):
        random.shuffle(order)
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            documents = [e.positive for e in batch] + [n for e in batch for n in e.negatives]
            queries = embed([e.query for e in batch])
            logits = queries @ embed(documents).T / temperature
            labels = torch.arange(len(batch), device=device)
            loss = torch.nn.functional.cross_entropy(logits, labels)
            optimiser.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]
            optimiser.step()
            report.losses.append(float(loss.detach()))
            report.steps += 1
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    report.out = out
    return report
