"""Training the late-interaction reranker (:mod:`retriever.rerank`) on CPU.

The reranker reads a query and a tool as token vectors: the bundled MiniLM with its
top layer fine-tuned, then a learned projection to :data:`retriever.rerank.weights.DIM`
dimensions, each token normalised; a tool scores the mean over the query's tokens of
each one's best cosine among the tool's tokens (MaxSim). The five layers under the top
one stay frozen, so their states are computed once per text
(:mod:`retriever.finetune.states`) and a step runs the top layer and the projection
alone. Loss: InfoNCE over the batch's candidates (each query's positive, its BM25 hard
negatives, a few random tools of the set, every other query's candidates), a duplicate
of a relevant tool counted as a positive, as :mod:`retriever.finetune.layers` trains
the bi-encoder's top layer.

    python -m retriever.finetune.late --out retriever/adapters/minilm-l6-v2-rerank.npz
"""

from __future__ import annotations

import argparse
import copy
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from retriever.embedder import bundled_model_path
from retriever.finetune.data import TRAIN_SETS, TrainingSet, read_set
from retriever.finetune.layers import StatedSet, contrastive_loss, sample_batch
from retriever.finetune.states import LowerLayers
from retriever.rerank.weights import DIM, MAX_QUERY_TOKENS, MAX_TOOL_TOKENS, save_weights

if TYPE_CHECKING:
    import torch

#: Held out of the shipped reranker's training, reported as left out (docs/benchmarks.md).
HELD_OUT = ("toolalpaca", "tooleyes")


@dataclass(frozen=True)
class LateSettings:
    steps: int = 600
    batch_size: int = 16
    hard_per_query: int = 2
    random_tools: int = 8
    layer_rate: float = 5e-5
    projection_rate: float = 1e-3
    temperature: float = 0.05
    seed: int = 0


def score_matrix(
    queries: torch.Tensor, query_mask: torch.Tensor, tools: torch.Tensor, tool_mask: torch.Tensor
) -> torch.Tensor:
    """MaxSim of every query against every tool: ``[queries, tools]``. Token vectors are
    normalised; a query's score is the mean over its tokens of the best tool token."""
    import torch

    sims = torch.einsum("qad,tbd->qtab", queries, tools)
    sims = sims.masked_fill(tool_mask[None, :, None, :] == 0, -2.0)
    best = sims.max(dim=3).values  # [q, t, a]
    weights = query_mask[:, None, :]
    return (best * weights).sum(dim=2) / weights.sum(dim=2).clamp(min=1.0)


class LateModel:
    """The trained top layer and the projection, over cached lower-layer states."""

    def __init__(self, top: torch.nn.Module, hidden: int, seed: int) -> None:
        import torch

        torch.manual_seed(seed)
        self.layer = copy.deepcopy(top).train()
        self.projection = torch.nn.Linear(hidden, DIM, bias=False)
        torch.nn.init.orthogonal_(self.projection.weight)

    def tokens(self, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        import torch

        additive = (1.0 - mask)[:, None, None, :] * torch.finfo(torch.float32).min
        hidden = self.layer(states, additive)
        hidden = hidden[0] if isinstance(hidden, tuple) else hidden
        return torch.nn.functional.normalize(self.projection(hidden), dim=-1)


def train_late(
    top: torch.nn.Module, sets: Sequence[StatedSet], settings: LateSettings, out: Path, name: str
) -> list[float]:
    """Train on ``sets``; every 100 steps and at the end write the weights to ``out``."""
    import torch

    rng = random.Random(settings.seed)
    model = LateModel(top, int(sets[0].tools.tokens.shape[1]), settings.seed)
    optimiser = torch.optim.AdamW(
        [
            {"params": list(model.layer.parameters()), "lr": settings.layer_rate},
            {"params": list(model.projection.parameters()), "lr": settings.projection_rate},
        ],
        weight_decay=0.0,
    )
    warmup = max(1, settings.steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: min(1.0, (s + 1) / warmup) * max(0.0, 1 - s / settings.steps)
    )
    weights = [len(s.data.query_ids) for s in sets]
    losses: list[float] = []
    started = time.perf_counter()
    for step in range(settings.steps):
        stated = rng.choices(sets, weights=weights)[0]
        loss = _loss(model, stated, settings, rng)
        optimiser.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        torch.nn.utils.clip_grad_norm_(
            [*model.layer.parameters(), *model.projection.parameters()], 1.0
        )
        optimiser.step()
        schedule.step()
        losses.append(float(loss.detach()))
        if (step + 1) % 20 == 0:
            recent = float(np.mean(losses[-20:]))
            print(
                f"step {step + 1}/{settings.steps} loss {recent:.3f} "
                f"{time.perf_counter() - started:.0f} s",
                flush=True,
            )
        if (step + 1) % 100 == 0 or step + 1 == settings.steps:
            _save(top, model, name, out)
    return losses


def _loss(
    model: LateModel, stated: StatedSet, settings: LateSettings, rng: random.Random
) -> torch.Tensor:
    batch = sample_batch(stated.data, settings, rng)
    q_states, q_mask = stated.queries.batch(batch.rows, MAX_QUERY_TOKENS)
    t_states, t_mask = stated.tools.batch(batch.candidates, MAX_TOOL_TOKENS)
    scores = score_matrix(
        model.tokens(q_states, q_mask), q_mask, model.tokens(t_states, t_mask), t_mask
    )
    return contrastive_loss(scores / settings.temperature, batch.positive)


def _save(top: torch.nn.Module, model: LateModel, name: str, out: Path) -> None:
    before = dict(top.named_parameters())
    deltas = {
        f"{name}.{param}": (value.detach() - before[param].detach()).numpy()
        for param, value in model.layer.named_parameters()
    }
    projection = model.projection.weight.detach().numpy().astype(np.float32)
    save_weights(deltas, projection, out)


def stated_sets(
    train_dir: Path, names: Sequence[str], lower: LowerLayers, cache: Path, max_queries: int
) -> list[StatedSet]:
    sets = []
    for name in names:
        data: TrainingSet = read_set(train_dir / name, max_queries=max_queries, max_tools=600)
        print(f"{name}: {len(data.query_ids)} queries, {len(data.doc_ids)} tools", flush=True)
        sets.append(
            StatedSet(
                data,
                lower.cached_states(data.query_texts, cache, f"{name} queries", MAX_QUERY_TOKENS),
                lower.cached_states(data.doc_texts, cache, f"{name} tools", MAX_TOOL_TOKENS),
            )
        )
    return sets


def main() -> None:
    parser = argparse.ArgumentParser(description="train the late-interaction reranker")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--train-dir", type=Path, default=Path("../shared/data/train"))
    parser.add_argument("--cache-dir", type=Path, default=Path(".cache/retriever/states"))
    parser.add_argument("--steps", type=int, default=LateSettings.steps)
    parser.add_argument("--max-queries", type=int, default=500)
    parser.add_argument(
        "--hold-out", default=",".join(HELD_OUT), help="training sets left out, comma-separated"
    )
    args = parser.parse_args()
    held = {name.strip() for name in args.hold_out.split(",") if name.strip()}
    names = [name for name in TRAIN_SETS if name not in held]
    lower = LowerLayers(bundled_model_path(), trained=1, threads=1)
    sets = stated_sets(args.train_dir, names, lower, args.cache_dir, args.max_queries)
    settings = LateSettings(steps=args.steps)
    losses = train_late(lower.top[0], sets, settings, args.out, lower.top_names[0])
    print(f"loss {losses[0]:.3f} -> {np.mean(losses[-20:]):.3f}: {args.out}")


if __name__ == "__main__":
    main()
