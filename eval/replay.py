"""``python -m eval.replay --corpus BEIR_DIR --json FILE``: does search improve with traffic?

A BEIR folder's ``qrels/train.tsv`` is the traffic: its queries, in the order the file
first lists them, each served by its relevant tools (the success signal), replayed
through the proxy's own path: the candidate list the tenant's search shows, a
:class:`~proxy.plan.model.Plan` keeping the served tools, its
:class:`~proxy.execute.scheduler.PlanRun` with every call succeeded, handed to
:meth:`Learner.observe_run <proxy.learning.service.Learner.observe_run>`; the tenant's
retrieval state is rebuilt by :meth:`TrafficRetrieval.refresh
<proxy.learning.retrieval.TrafficRetrieval.refresh>` (what the proxy runs in the
background) after each sixteenth of the traffic, with its held-out check and rollback.
``qrels/test.tsv`` is the evaluation: NDCG@5 and Recall@5 of the catalog search
(:meth:`CandidateFinder.retrieve <proxy.plan.candidates.CandidateFinder.retrieve>`, as
orchestrate mode's candidate lists read it) before (today's default) and after. A folder
with one qrels file has its queries split in order: the first half traffic, the second
the evaluation (the output says so).

Besides ``before`` and ``after`` (percent), FILE holds: ``noisy``, the same traffic with
``--noise`` (20 %) of its requests served by tools drawn at random; ``isolation``, a
second tenant replaying conflicting traffic (every tool renamed by a fixed random
permutation) interleaved with a first's, and how many of the first's evaluation rankings
differ from those it gets alone (must be 0); ``curve``, the metrics after each eighth of
the traffic (also drawn to ``--plot``); ``search_ms``, the search's p50 without and with
the learned state. Progress goes to stderr; bad input is one line there and exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import JsonValue

from eval.retrieval import _json_lines
from proxy.config import LearningSettings, Settings
from proxy.execute.plan import PlanNode
from proxy.execute.scheduler import CallRecord, Outcome, PlanRun
from proxy.learning.retrieval import TrafficRetrieval
from proxy.learning.service import Learner
from proxy.learning.store import LearnedStore, open_learned_store
from proxy.plan.model import Decision, Plan, SubTask
from retriever.metrics import ndcg_at, recall_at

if TYPE_CHECKING:
    from proxy.plan.candidates import CandidateFinder
    from retriever.encoder import EncodeCounts, Encoder, Vectors

#: Rebuilds per replay (the traffic in sixteenths) and curve points (every second one).
CHUNKS = 16
CURVE_EVERY = 2
NOISE = 0.2
SEED = 7
#: The metrics' depth.
K = 5
NAME_LIMIT = 64  # a plan node's tool name (proxy.execute.plan.PlanNode)


class ReplayError(Exception):
    """Input the replay cannot read: one line for the user."""


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    relevant: dict[str, int]  # tool id → grade


@dataclass(frozen=True)
class Split:
    traffic: list[Query]
    evaluation: list[Query]
    how: str  # which files, or that one file was split


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """Query id → {tool id: grade > 0}, in the order the file first lists each query."""
    found: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines):
            parts = line.rstrip("\n").split("\t")
            if number == 0 and not parts[-1].lstrip("-").isdigit():
                continue  # the header
            if len(parts) >= 3 and int(parts[2]) > 0:
                found.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    return found


def load_split(folder: Path, limit: int | None) -> tuple[list[dict[str, JsonValue]], Split]:
    """The corpus rows and the traffic / evaluation queries of a BEIR folder."""
    if not folder.is_dir():
        raise ReplayError(f"{folder} is not a folder")
    corpus_path = next(
        (folder / n for n in ("corpus.jsonl", "corpus.jsonl.gz") if (folder / n).is_file()), None
    )
    if corpus_path is None:
        raise ReplayError(f"{folder} has no corpus.jsonl")
    if not (folder / "queries.jsonl").is_file():
        raise ReplayError(f"{folder} has no queries.jsonl")
    train, test = folder / "qrels" / "train.tsv", folder / "qrels" / "test.tsv"
    files = [p for p in (train, test) if p.is_file()]
    if not files:
        raise ReplayError(f"{folder} has no qrels/train.tsv or qrels/test.tsv")
    texts = {str(r["_id"]): str(r["text"]) for r in _json_lines(folder / "queries.jsonl")}
    corpus: list[dict[str, JsonValue]] = list(_json_lines(corpus_path))
    known = {str(row["_id"]) for row in corpus}

    def queries(qrels: dict[str, dict[str, int]]) -> list[Query]:
        found = []
        for qid, relevant in qrels.items():
            relevant = {t: g for t, g in relevant.items() if t in known}
            if qid in texts and relevant:
                found.append(Query(qid, texts[qid], relevant))
        return found

    if len(files) == 2:
        split = Split(
            spaced(queries(read_qrels(train)), limit), spaced(queries(read_qrels(test)), limit),
            "qrels/train.tsv is the traffic, qrels/test.tsv the evaluation",
        )  # fmt: skip
    else:
        every = spaced(queries(read_qrels(files[0])), limit)
        half = len(every) // 2
        split = Split(
            every[:half], every[half:],
            f"only qrels/{files[0].name}: its queries split in order, the first half "
            "the traffic, the second the evaluation",
        )  # fmt: skip
    if not split.traffic or not split.evaluation:
        raise ReplayError(f"{folder}: too few queries with relevant tools to replay")
    return corpus, split


def spaced(queries: list[Query], limit: int | None) -> list[Query]:
    """``limit`` queries evenly spaced over the file, in its order (all without a limit):
    the first N of a file ordered by service would replay one service and score another."""
    if limit is None or len(queries) <= limit:
        return queries
    return [queries[i * len(queries) // limit] for i in range(limit)]


class KnownVectors:
    """An :class:`Encoder` answering from vectors embedded in bulk beforehand."""

    def __init__(self, encoder: Encoder, known: dict[str, Vectors]) -> None:
        self.encoder = encoder
        self.known = known

    @property
    def name(self) -> str:
        return self.encoder.name

    @property
    def dim(self) -> int:
        return self.encoder.dim

    @property
    def counts(self) -> EncodeCounts:
        return self.encoder.counts

    def encode(self, texts: list[str]) -> Vectors:
        import numpy as np

        missing = [t for t in dict.fromkeys(texts) if t not in self.known]
        if missing:
            self.known.update(zip(missing, self.encoder.encode(missing), strict=True))
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        stacked: Vectors = np.stack([self.known[t] for t in texts])
        return stacked


@dataclass
class Bench:
    """One catalog searched as orchestrate mode searches it, and its tenants' learning."""

    finder: CandidateFinder
    traffic: TrafficRetrieval
    learner: Learner
    encoder: Encoder
    names: dict[str, str]  # tool id → catalog name
    k: int  # the length of the candidate list a request is shown

    def vector(self, text: str) -> Vectors:
        row: Vectors = self.encoder.encode([text])[0]
        return row

    def searcher(self, tenant: str | None) -> CandidateFinder:
        state = None if tenant is None else self.traffic.live(tenant)
        return self.finder if state is None else self.finder.with_traffic(state)

    def ranking(self, tenant: str | None, query: Query, depth: int = K) -> list[str]:
        found = self.searcher(tenant).retrieve(query.text, self.vector(query.text), depth)
        return [c.tool_id for c in found]

    async def serve(self, tenant: str, query: Query, tools: Sequence[str]) -> None:
        """What the proxy records after ``tools`` served ``query`` for ``tenant``."""
        plan, run = served_run(query, tools, self.searcher(tenant), self.vector(query.text), self)
        await self.learner.observe_run(tenant, plan, run)


def served_run(
    query: Query, tools: Sequence[str], finder: CandidateFinder, vector: Vectors, bench: Bench
) -> tuple[Plan, PlanRun]:
    """The plan and run of a request whose sub-task (``query``) ``tools`` served (ids), each
    as its own sub-task beside the list the tenant's search showed, every call succeeded."""
    shown = finder.retrieve(query.text, vector, bench.k)
    subtasks = [SubTask(id=f"s{i}", text=query.text) for i in range(len(tools))]
    plan = Plan(subtasks, {}, "graph")
    records = {}
    for task, tool in zip(subtasks, tools, strict=True):
        name = bench.names[tool]
        plan.choices[task.id] = name
        plan.decisions.append(Decision(task.id, shown, name, "replayed"))
        records[task.id] = CallRecord(PlanNode(id=task.id, tool=name, task=task.text), Outcome.OK)
    return plan, PlanRun(records)


def scores(bench: Bench, tenant: str | None, evaluation: Sequence[Query]) -> dict[str, float]:
    ndcg, recall = [], []
    for query in evaluation:
        ranked = bench.ranking(tenant, query)
        ndcg.append(ndcg_at(ranked, query.relevant, K))
        recall.append(recall_at(ranked, query.relevant, K))
    return {f"ndcg@{K}": _percent(ndcg), f"recall@{K}": _percent(recall)}


def _percent(values: Sequence[float]) -> float:
    return round(100 * statistics.fmean(values), 2) if values else 0.0


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


async def replay(
    bench: Bench,
    tenants: Sequence[tuple[str, Sequence[Sequence[str]]]],
    traffic: Sequence[Query],
    evaluation: Sequence[Query] = (),
    curve: list[dict[str, float]] | None = None,
) -> dict[str, int]:
    """Replay ``traffic`` for each tenant (its own tools per request), interleaved request
    by request, each tenant's state rebuilt after each of :data:`CHUNKS` parts; with
    ``curve``, the first tenant's scores after every :data:`CURVE_EVERY` parts."""
    outcomes: dict[str, int] = {}
    for chunk in range(CHUNKS):
        start, end = len(traffic) * chunk // CHUNKS, len(traffic) * (chunk + 1) // CHUNKS
        for i in range(start, end):
            for tenant, tools in tenants:
                await bench.serve(tenant, traffic[i], tools[i])
        for tenant, _ in tenants:
            check = await bench.traffic.refresh(tenant)
            outcomes[check.outcome] = outcomes.get(check.outcome, 0) + 1
        if curve is not None and (chunk + 1) % CURVE_EVERY == 0:
            point = {"replayed": end, **scores(bench, tenants[0][0], evaluation)}
            curve.append(point)
            say(f"  {end} requests replayed: {point}")
    return outcomes


async def run_replay(
    bench: Bench, split: Split, noise: float, tools: Sequence[str]
) -> dict[str, object]:
    """Every row: before, the curve, after, noisy, isolation, the search's p50."""
    run = f"{time.time_ns()}"  # this run's tenants alone, in a shared Redis too
    gold = [list(q.relevant) for q in split.traffic]
    before = scores(bench, None, split.evaluation)
    curve: list[dict[str, float]] = [{"replayed": 0, **before}]
    say(f"before: {before}")
    clean = f"{run}:clean"
    rebuilds = await replay(bench, [(clean, gold)], split.traffic, split.evaluation, curve)
    after = scores(bench, clean, split.evaluation)
    say(f"after: {after}")
    rng = random.Random(SEED)
    wrong = [rng.sample(list(tools), len(g)) if rng.random() < noise else g for g in gold]
    noisy = f"{run}:noisy"
    await replay(bench, [(noisy, wrong)], split.traffic)
    noisy_scores = scores(bench, noisy, split.evaluation)
    say(f"noisy ({noise:.0%} wrong): {noisy_scores}")
    shuffled = list(tools)
    random.Random(SEED).shuffle(shuffled)
    renamed = dict(zip(tools, shuffled, strict=True))
    conflicting = [[renamed[t] for t in g] for g in gold]
    first, second = f"{run}:a", f"{run}:b"
    await replay(bench, [(first, gold), (second, conflicting)], split.traffic)
    differ = sum(
        bench.ranking(first, q) != bench.ranking(clean, q) for q in split.evaluation
    )  # fmt: skip
    say(f"isolation: {differ} of {len(split.evaluation)} rankings differ")
    return {
        "split": split.how,
        "traffic": len(split.traffic),
        "evaluated": len(split.evaluation),
        "tools": len(tools),
        "before": before,
        "after": after,
        "noisy": noisy_scores,
        "noise": noise,
        "isolation": {
            "rankings_that_differ": differ,
            "tenant_b_conflicting": scores(bench, second, split.evaluation),
        },
        "curve": curve,
        "rebuilds": rebuilds,
        "search_ms": search_ms(bench, clean, split.evaluation),
        "settings": {
            "retrieval_weight": bench.learner.options.retrieval_weight,
            "retrieval_prior": bench.learner.options.retrieval_prior,
        },
    }


def search_ms(bench: Bench, tenant: str, evaluation: Sequence[Query]) -> dict[str, float]:
    """The p50 of one search (a list of ``bench.k``, asked first) without and with
    ``tenant``'s learned state, the two interleaved query by query (the machine is
    shared: two passes one after the other would compare two loads)."""
    plain, learned = bench.finder, bench.searcher(tenant)
    seconds: dict[str, list[float]] = {"p50_without_state": [], "p50_with_state": []}
    for i, query in enumerate(evaluation):
        vector = bench.vector(query.text)
        arms = [("p50_without_state", plain), ("p50_with_state", learned)]
        for name, finder in arms if i % 2 else arms[::-1]:
            started = time.perf_counter()
            finder.retrieve(query.text, vector, bench.k + 1)  # a length no other call asks
            seconds[name].append(time.perf_counter() - started)
    return {name: round(1000 * statistics.median(s), 3) for name, s in seconds.items()}


def build_bench(
    corpus: Sequence[dict[str, JsonValue]],
    split: Split,
    settings: Settings,
    store: LearnedStore,
    cache: Path | None,
) -> tuple[Bench, list[str]]:
    """The catalog's index, finder and learner as the proxy builds them, every query (and
    its clauses) embedded in bulk first."""
    from graph_store.embedded import InProcessStore
    from proxy.plan.candidates import CandidateFinder, weights_from
    from retriever.bulk import embed_documents
    from retriever.clauses import split_clauses
    from retriever.documents import corpus_fields, make_document
    from retriever.embedder import load_encoder
    from retriever.index import ToolIndex
    from retriever.recent import remembering

    config = settings.retriever
    base = load_encoder(config)
    documents = [make_document(corpus_fields(row), config.document) for row in corpus]
    counted: dict[str, int] = {}
    for doc in documents:
        counted[doc.name] = counted.get(doc.name, 0) + 1
    # a plan names tools by catalog name: ids where names repeat or are too long
    documents = [
        d if counted[d.name] == 1 and len(d.name) <= NAME_LIMIT else replace(d, name=d.id)
        for d in documents
    ]
    say(f"embedding {len(documents)} tools")
    vectors = embed_documents(
        base, [d.text for d in documents], cache_dir=cache, progress=False, label="tools"
    )
    index = ToolIndex.from_config(documents, vectors, config)
    texts = [q.text for q in (*split.traffic, *split.evaluation)]
    texts = list(dict.fromkeys(texts + [c for t in texts for c in split_clauses(t)]))
    say(f"embedding {len(texts)} queries and clauses")
    rows = embed_documents(base, texts, cache_dir=cache, progress=False, label="queries")
    encoder = KnownVectors(base, dict(zip(texts, rows, strict=True)))
    clauses = remembering(encoder) if config.clauses else None
    planner = settings.planner
    finder = CandidateFinder(
        InProcessStore(), index, weights_from(planner), mode=planner.graph_mode, clauses=clauses
    )
    options = settings.learning
    learner = Learner(store, options)
    bench = Bench(
        finder,
        TrafficRetrieval(finder, encoder, learner),
        learner,
        encoder,
        {d.id: d.name for d in documents},
        planner.top_k,
    )
    return bench, [d.id for d in documents]


def subsample(
    corpus: list[dict[str, JsonValue]], split: Split, distractors: int | None
) -> list[dict[str, JsonValue]]:
    """Every tool a query names, and ``distractors`` others (seeded); all without a limit."""
    if distractors is None:
        return corpus
    named = {t for q in (*split.traffic, *split.evaluation) for t in q.relevant}
    others = [row for row in corpus if str(row["_id"]) not in named]
    picked = random.Random(SEED).sample(others, min(distractors, len(others)))
    return [row for row in corpus if str(row["_id"]) in named] + picked


def plot(name: str, found: dict[str, object], path: Path) -> None:
    """NDCG@5 of the evaluation queries against requests replayed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6.4, 4.0))
    points = found["curve"]
    assert isinstance(points, list)
    (line,) = axes.plot(
        [p["replayed"] for p in points],
        [p[f"ndcg@{K}"] for p in points],
        marker="o",
        label=f"{name}: NDCG@{K}",
    )
    noisy = found["noisy"]
    assert isinstance(noisy, dict)
    axes.axhline(noisy[f"ndcg@{K}"], linestyle=":", color=line.get_color(), label="noisy")
    axes.set_xlabel("requests replayed")
    axes.set_ylabel("evaluation queries, percent")
    axes.set_title(f"Catalog search while learning from traffic ({name})")
    axes.legend()
    axes.grid(alpha=0.3)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m eval.replay", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--corpus", type=Path, required=True, help="a BEIR folder")
    parser.add_argument("--json", type=Path, required=True, help="where the results go")
    parser.add_argument("--plot", type=Path, help="the learning curve (PNG; default: none)")
    parser.add_argument("--noise", type=float, default=NOISE, help="wrong share of the signal")
    parser.add_argument("--limit", type=int, help="N queries of each qrels file, evenly spaced")
    parser.add_argument("--distractors", type=int, help="tools beside the relevant ones")
    parser.add_argument("--redis-url", help="keep the learned state in this Redis")
    parser.add_argument("--weight", type=float, help="learning.retrieval_weight (default: shipped)")
    parser.add_argument("--prior", type=float, help="learning.retrieval_prior (default: shipped)")
    parser.add_argument("--cache-dir", type=Path, default=Path(".cache/embeddings"))
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    started = time.perf_counter()
    try:
        corpus, split = load_split(args.corpus, args.limit)
    except (ReplayError, OSError, ValueError, KeyError) as exc:
        print(f"eval.replay: {exc}", file=sys.stderr)
        return 2
    corpus = subsample(corpus, split, args.distractors)
    say(f"{args.corpus.name}: {split.how}; {len(split.traffic)} / {len(split.evaluation)}")
    settings = Settings()
    update: dict[str, object] = {"enabled": True, "retrieval": True}
    if args.weight is not None:
        update["retrieval_weight"] = args.weight
    if args.prior is not None:
        update["retrieval_prior"] = args.prior
    learning = settings.learning.model_copy(update=update)
    settings = settings.model_copy(update={"learning": learning})
    found = asyncio.run(_with_store(corpus, split, settings, args))
    found["seconds"] = round(time.perf_counter() - started, 1)
    found["set"] = args.corpus.name
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(found, indent=2) + "\n")
    if args.plot is not None:
        plot(args.corpus.name, found, args.plot)
    say(f"wrote {args.json}")
    return 0


async def _with_store(
    corpus: list[dict[str, JsonValue]], split: Split, settings: Settings, args: argparse.Namespace
) -> dict[str, object]:
    options: LearningSettings = settings.learning
    redis = None
    if args.redis_url is not None:
        from redis.asyncio import Redis

        redis = Redis.from_url(args.redis_url)
    try:
        store = open_learned_store(redis, options.max_entries, options.max_tenants)
        bench, tools = build_bench(corpus, split, settings, store, args.cache_dir)
        return await run_replay(bench, split, args.noise, tools)
    finally:
        if redis is not None:
            await redis.aclose()


if __name__ == "__main__":
    raise SystemExit(main())
