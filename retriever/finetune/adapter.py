"""Training the retrieval adapter on the frozen encoder's cached vectors.

The map is ``x -> normalise(x (I + A))``, the same for queries and tool documents;
``A`` is a full ``dim x dim`` matrix (``rank=0``) or a low-rank ``U V`` (LoRA-style,
``rank=r``), started at zero so training begins from the encoder as it is. Loss:
InfoNCE over every tool of the query's own training set (its BM25 hard negatives
among them, plus ``hard_weight`` extra weight on those), with the query's other
relevant tools and their functional duplicates masked out, at a fixed temperature.
Batches are drawn one set at a time, sets in proportion to their (capped) queries.
Seeded: the same data and settings give the same matrix.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from tqdm import tqdm

from retriever.adapter import BUNDLED_ADAPTER
from retriever.embedder import Vectors
from retriever.finetune.data import EmbeddedSet

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class AdapterSettings:
    rank: int = 0  # 0: a full matrix; r > 0: A = U V with U dim x r
    epochs: int = 3
    learning_rate: float = 1e-3
    weight_decay: float = 0.01
    batch_size: int = 64
    temperature: float = 0.05
    hard_weight: float = 1.0  # added to a BM25 hard negative's softmax weight (log-space)
    seed: int = 0


@dataclass
class AdapterReport:
    matrix: Vectors
    losses: list[float] = field(default_factory=list)
    steps: int = 0


def train_adapter(
    sets: Sequence[EmbeddedSet], settings: AdapterSettings, *, progress: bool = True
) -> AdapterReport:
    """The adapter's matrix (``I + A``), trained on ``sets``."""
    import torch

    random.seed(settings.seed)
    np.random.seed(settings.seed)
    torch.manual_seed(settings.seed)
    dim = sets[0].doc_vectors.shape[1]
    if settings.rank:
        down = torch.nn.Parameter(torch.randn(dim, settings.rank) * 0.01)
        up = torch.nn.Parameter(torch.zeros(settings.rank, dim))
        params = [down, up]
    else:
        full = torch.nn.Parameter(torch.zeros(dim, dim))
        params = [full]

    def delta() -> torch.Tensor:
        return down @ up if settings.rank else full

    optimiser = torch.optim.AdamW(
        params, lr=settings.learning_rate, weight_decay=settings.weight_decay
    )
    tensors = [_SetTensors.of(s) for s in sets]
    batches = _schedule(sets, settings)
    report = AdapterReport(matrix=np.eye(dim, dtype=np.float32))
    identity = torch.eye(dim)
    for set_index, rows in tqdm(batches, desc="training adapter", disable=not progress):
        data = tensors[set_index]
        mapping = identity + delta()
        queries = torch.nn.functional.normalize(data.queries[rows] @ mapping, dim=-1)
        docs = torch.nn.functional.normalize(data.docs @ mapping, dim=-1)
        logits = queries @ docs.T / settings.temperature + settings.hard_weight * data.hard[rows]
        logits = logits.masked_fill(data.masked[rows], float("-inf"))
        positive = logits.masked_fill(~data.positive[rows], float("-inf"))
        loss = (torch.logsumexp(logits, dim=1) - torch.logsumexp(positive, dim=1)).mean()
        optimiser.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        optimiser.step()
        report.losses.append(float(loss.detach()))
        report.steps += 1
    with torch.no_grad():
        report.matrix = (identity + delta()).numpy().astype(np.float32)
    return report


def _schedule(
    sets: Sequence[EmbeddedSet], settings: AdapterSettings
) -> list[tuple[int, list[int]]]:
    """(set, query rows) per step: each set's queries shuffled into batches, every epoch."""
    rng = random.Random(settings.seed)
    batches: list[tuple[int, list[int]]] = []
    for _ in range(settings.epochs):
        epoch = []
        for set_index, data in enumerate(sets):
            rows = list(range(len(data.query_ids)))
            rng.shuffle(rows)
            size = settings.batch_size
            epoch += [(set_index, rows[i : i + size]) for i in range(0, len(rows), size)]
        rng.shuffle(epoch)
        batches += epoch
    return batches


@dataclass(frozen=True)
class _SetTensors:
    """One set's vectors and, per query, which tools are relevant, masked and hard."""

    queries: torch.Tensor
    docs: torch.Tensor
    positive: torch.Tensor  # bool [queries, tools]
    masked: torch.Tensor  # bool: a duplicate of a relevant tool that is not one itself
    hard: torch.Tensor  # float: 1 where a BM25 hard negative

    @staticmethod
    def of(data: EmbeddedSet) -> _SetTensors:
        import torch as t

        n_queries, n_docs = len(data.query_ids), len(data.doc_ids)
        positive = np.zeros((n_queries, n_docs), dtype=bool)
        masked = np.zeros((n_queries, n_docs), dtype=bool)
        hard = np.zeros((n_queries, n_docs), dtype=np.float32)
        keys = np.asarray(data.doc_keys)
        for row, (relevant, negatives) in enumerate(
            zip(data.positives, data.negatives, strict=True)
        ):
            positive[row, relevant] = True
            duplicates = np.isin(keys, keys[relevant])
            masked[row] = duplicates & ~positive[row]
            hard[row, negatives] = 1.0
        return _SetTensors(
            queries=t.from_numpy(data.query_vectors),
            docs=t.from_numpy(data.doc_vectors),
            positive=t.from_numpy(positive),
            masked=t.from_numpy(masked),
            hard=t.from_numpy(hard),
        )


def save_adapter(matrix: Vectors, base_model: str, out: Path) -> None:
    """The artifact :func:`retriever.adapter.load_adapter` reads."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(".part.npz")
    np.savez_compressed(partial, matrix=matrix.astype(np.float32), base_model=np.str_(base_model))
    partial.replace(out)


def main() -> None:
    """``python -m retriever.finetune.adapter``: train on the eight sets, write the file."""
    from retriever.config import RetrieverConfig
    from retriever.embedder import load_encoder
    from retriever.finetune.data import TRAIN_SETS, load_set

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--data", type=Path, required=True, help="the train/ folder")
    parser.add_argument("--out", type=Path, default=BUNDLED_ADAPTER)
    parser.add_argument("--sets", default=",".join(TRAIN_SETS), help="comma-separated")
    parser.add_argument("--cache-dir", type=Path, default=Path(".cache/retriever/train_embeddings"))
    defaults = AdapterSettings()
    parser.add_argument("--rank", type=int, default=defaults.rank)
    parser.add_argument("--epochs", type=int, default=defaults.epochs)
    parser.add_argument("--lr", type=float, default=defaults.learning_rate)
    parser.add_argument("--hard-weight", type=float, default=defaults.hard_weight)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    args = parser.parse_args()
    encoder = load_encoder(RetrieverConfig(device="cpu", adapter=False))
    sets = [
        load_set(args.data / name, encoder, cache_dir=args.cache_dir, seed=args.seed)
        for name in args.sets.split(",")
    ]
    settings = AdapterSettings(
        rank=args.rank,
        epochs=args.epochs,
        learning_rate=args.lr,
        hard_weight=args.hard_weight,
        seed=args.seed,
    )
    started = time.perf_counter()
    report = train_adapter(sets, settings)
    save_adapter(report.matrix, encoder.name, args.out)
    per_epoch = max(1, report.steps // settings.epochs)
    first, last = report.losses[:per_epoch], report.losses[-per_epoch:]
    print(
        f"{report.steps} steps in {time.perf_counter() - started:.0f} s, mean loss "
        f"{np.mean(first):.3f} (first epoch) → {np.mean(last):.3f} (last): {args.out} "
        f"({args.out.stat().st_size / 1e6:.2f} MB)"
    )


if __name__ == "__main__":
    main()
