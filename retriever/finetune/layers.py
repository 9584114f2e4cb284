"""Contrastive fine-tuning of the encoder's top layer(s) on the training sets, on CPU.

Only the top ``trained`` transformer layers of the bundled MiniLM change; the layers
under them are run once per text (:mod:`retriever.finetune.states`), so a step costs
the top layers' forward and backward passes alone. Loss: InfoNCE over the batch's
candidates (each query's positive, up to ``hard_per_query`` of its BM25 hard
negatives, ``random_tools`` other tools of the set, and every other query's
candidates), with every candidate that shares a duplicate key with a relevant tool
counted as a positive (SGD's same intent in another service; train/README.md says
never a negative). Batches are drawn one set at a time, so in-batch negatives are
tools of the same catalog. The result is what changed: one float16 delta per trained
parameter (:func:`retriever.delta.save_delta`), a few MB.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np
from tqdm import tqdm

from retriever.finetune.data import TrainingSet
from retriever.finetune.states import States, run_top

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class LayerSettings:
    steps: int = 300
    batch_size: int = 16
    hard_per_query: int = 1
    random_tools: int = 8
    learning_rate: float = 1e-4
    temperature: float = 0.05
    max_tool_tokens: int = 64  # the top layer sees a tool's first tokens when training
    seed: int = 0


@dataclass
class StatedSet:
    """A training set with the lower layers' states of its tools and queries."""

    data: TrainingSet
    queries: States
    tools: States


@dataclass
class LayerReport:
    deltas: dict[str, np.ndarray]
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0


def train_top_layers(
    top: list[torch.nn.Module],
    names: list[str],
    sets: Sequence[StatedSet],
    settings: LayerSettings,
    *,
    progress: bool = True,
) -> LayerReport:
    """Train copies of ``top`` (the layers named ``names`` in the network) on ``sets``;
    the deltas from the originals, in float16. ``top`` itself is left unchanged."""
    import copy

    import torch

    random.seed(settings.seed)
    torch.manual_seed(settings.seed)
    layers = [copy.deepcopy(layer).train() for layer in top]
    params = [p for layer in layers for p in layer.parameters()]
    optimiser = torch.optim.AdamW(params, lr=settings.learning_rate, weight_decay=0.0)
    warmup = max(1, settings.steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda step: min(1.0, (step + 1) / warmup) * max(0.0, 1 - step / settings.steps)
    )
    rng = random.Random(settings.seed)
    weights = [len(s.data.query_ids) for s in sets]
    report = LayerReport(deltas={})
    started = time.perf_counter()
    for _ in tqdm(range(settings.steps), desc="training top layers", disable=not progress):
        stated = rng.choices(sets, weights=weights)[0]
        loss = _loss(layers, stated, settings, rng)
        optimiser.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimiser.step()
        schedule.step()
        report.losses.append(float(loss.detach()))
    report.seconds = time.perf_counter() - started
    report.deltas = _deltas(top, layers, names)
    return report


def _loss(
    layers: list[torch.nn.Module],
    stated: StatedSet,
    settings: LayerSettings,
    rng: random.Random,
) -> torch.Tensor:
    batch = sample_batch(stated.data, settings, rng)
    queries = run_top(layers, *stated.queries.batch(batch.rows))
    tools = run_top(layers, *stated.tools.batch(batch.candidates, settings.max_tool_tokens))
    return contrastive_loss(queries @ tools.T / settings.temperature, batch.positive)


class Sampling(Protocol):
    """How many of each a batch draws (:class:`LayerSettings`, the late model's settings)."""

    @property
    def batch_size(self) -> int: ...
    @property
    def hard_per_query(self) -> int: ...
    @property
    def random_tools(self) -> int: ...


@dataclass(frozen=True)
class Batch:
    """One step's queries (rows of the set), its candidate tools, and ``positive``: for
    each query and candidate, whether the candidate shares a key with a relevant tool."""

    rows: list[int]
    candidates: list[int]
    positive: torch.Tensor


def sample_batch(data: TrainingSet, sampling: Sampling, rng: random.Random) -> Batch:
    """A batch of ``data``: queries, each one's positive and hard negatives, random tools."""
    import torch

    rows = rng.sample(range(len(data.query_ids)), min(sampling.batch_size, len(data.query_ids)))
    candidates: list[int] = []
    for row in rows:
        candidates.append(rng.choice(data.positives[row]))
        hard = data.negatives[row]
        candidates += rng.sample(hard, min(sampling.hard_per_query, len(hard)))
    candidates += rng.sample(
        range(len(data.doc_ids)), min(sampling.random_tools, len(data.doc_ids))
    )
    candidates = sorted(set(candidates))
    keys = [data.doc_keys[i] for i in candidates]
    positive = torch.tensor(
        [[key in {data.doc_keys[d] for d in data.positives[row]} for key in keys] for row in rows]
    )
    return Batch(rows, candidates, positive)


def contrastive_loss(logits: torch.Tensor, positive: torch.Tensor) -> torch.Tensor:
    """InfoNCE with several positives: the log-sum-exp of each query's logits less that of
    its positives', averaged over the queries."""
    import torch

    positives = logits.masked_fill(~positive, float("-inf"))
    return (torch.logsumexp(logits, dim=1) - torch.logsumexp(positives, dim=1)).mean()


def _deltas(
    before: list[torch.nn.Module], after: list[torch.nn.Module], names: list[str]
) -> dict[str, np.ndarray]:
    deltas: dict[str, np.ndarray] = {}
    for name, old, new in zip(names, before, after, strict=True):
        old_params = dict(old.named_parameters())
        for param, value in new.named_parameters():
            change = (value.detach() - old_params[param].detach()).numpy()
            deltas[f"{name}.{param}"] = change.astype(np.float16)
    return deltas
