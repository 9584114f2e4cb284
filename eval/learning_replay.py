"""``python -m eval.learning_replay``: does the planner plan better after it has served traffic?

Each set's requests are split in time order (the order the set lists them): the first
half is *traffic*, replayed through the proxy's own feedback path, the second half is
scored with the LLM-free planner the proxy ships (rerank, ``planner.top_k``, beam,
order evidence) before and after. Replaying a request means what the proxy does after
an answer: a :class:`~proxy.plan.model.Plan` of the request's sub-tasks, the tools that
served it chosen (the set's gold tools: the success signal) beside retrieval's list, its
:class:`~proxy.execute.scheduler.PlanRun` with every call succeeded, handed to
:meth:`Learner.observe_run <proxy.learning.service.Learner.observe_run>` with the
shipped settings; the planner then reads :meth:`Learner.evidence
<proxy.learning.service.Learner.evidence>` for the tenant. The store is the in-process
one, or Redis with ``--redis-url`` (the same counts either way).

Rows, per set (link F1, node F1 and candidate recall at K, in percent):

* ``before``: the offline trust alone (today's default); ``after``: after the traffic;
  the learning curve scores the later half after each eighth of it;
* ``noisy``: the same traffic with ``--noise`` (20 %) of its requests' signal wrong, each
  such request recorded as a success of tools drawn at random from the catalog;
* ``isolation``: a second tenant replays conflicting traffic (the same requests, every
  tool renamed by a fixed random permutation of the catalog) interleaved with the
  first's; the first tenant's plans must be exactly those it makes alone (the count of
  later-half plans that differ is reported), while the second's own score falls.

Sets: UltraTool (its 3,527 requests over 260 tools and the 611-link graph it declares),
and the training catalogs with ordered calls that ``eval.plan_trust`` reads (CallNavi's
ten domains, API-Bank, ToolTalk: multi-call questions, schema edges only, no call
sequences), each catalog a tenant of its own, scored together.

``--json`` keeps every set's rows: a run replaces those of the sets it ran, and the plot
shows every set in the file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from eval.data_folder import dataset
from eval.plan_catalog import build_index, plan_finder
from eval.plan_data import Dataset, Request, Tally, load_dataset, score_plan
from proxy.config import LearningSettings, Settings
from proxy.execute.scheduler import CallRecord, Outcome, PlanRun
from proxy.learning.service import Learner
from proxy.learning.store import LearnedStore, open_learned_store
from proxy.plan.model import Decision, Plan

if TYPE_CHECKING:
    from proxy.plan.candidates import CandidateFinder
    from proxy.plan.order import TextOrder
    from retriever.embedder import Encoder, Vectors

#: Points of the learning curve: eighths of the traffic.
CURVE = 8
NOISE = 0.2
SEED = 7


@dataclass
class Catalog:
    """One catalog, its traffic and its later half, planned with the shipped finder."""

    data: Dataset
    traffic: list[Request]
    later: list[Request]
    finder: CandidateFinder
    order: TextOrder | None
    vectors: dict[str, Vectors]
    k: int
    beam: int
    tools: list[str] = field(default_factory=list)


def split_in_time(requests: Sequence[Request]) -> tuple[list[Request], list[Request]]:
    """The first half (traffic) and the second (scored), in the set's own order."""
    half = len(requests) // 2
    return list(requests[:half]), list(requests[half:])


def served_run(request: Request, catalog: Catalog, tools: Sequence[str]) -> tuple[Plan, PlanRun]:
    """The plan and run the proxy would record had ``tools`` served ``request``: each
    sub-task's list as retrieval shows it, the tool kept, every call succeeded."""
    plan = Plan(list(request.subtasks), {}, "graph")
    for task, tool in zip(request.subtasks, tools, strict=True):
        shown = catalog.finder.retrieve(
            task.text, catalog.vectors[task.text], catalog.k, task.category
        )
        plan.choices[task.id] = tool
        plan.decisions.append(Decision(task.id, shown, tool, "replayed"))
    tool_plan = plan.tool_plan(catalog.data.store)
    records = {node.id: CallRecord(node, Outcome.OK) for node in tool_plan.nodes}
    return plan, PlanRun(records)


def wrong_tools(request: Request, tools: Sequence[str], rng: random.Random) -> list[str]:
    """A wrong signal: tools drawn at random, none repeated within the request."""
    return rng.sample(list(tools), len(request.nodes))


def renamed(request: Request, mapping: dict[str, str]) -> list[str]:
    return [mapping[tool] for tool in request.nodes]


def score(catalog: Catalog, finder: CandidateFinder, tally: Tally) -> list[list[str]]:
    """Score the later half with ``finder``; each plan's picks, for comparing tenants."""
    from proxy.plan.policy import plan_without_llm

    picks = []
    for request in catalog.later:
        vectors = {t.id: catalog.vectors[t.text] for t in request.subtasks}
        plan = plan_without_llm(
            finder, request.subtasks, vectors, catalog.k, beam=catalog.beam, order=catalog.order
        )
        score_plan(plan, request, tally, catalog.k)
        picks.append([plan.choices.get(t.id, "") for t in request.subtasks])
    return picks


async def finder_of(learner: Learner, tenant: str, catalog: Catalog) -> CandidateFinder:
    live = await learner.evidence(tenant)
    return catalog.finder if live is None else catalog.finder.learned(live)


async def replay_set(
    catalogs: Sequence[Catalog],
    store: LearnedStore,
    noise: float,
    progress: bool,
    options: LearningSettings | None = None,
) -> dict[str, object]:
    """Every row of one set (its catalogs pooled): before, the curve, after, noisy, and
    the two-tenant isolation check."""
    learner = Learner(store, options or LearningSettings(enabled=True))
    keys = ("link_f1", "node_f1", "candidate_recall")
    run = f"{time.time_ns()}"  # tenants of this run alone, in a shared Redis too

    def means(tally: Tally, k: int) -> dict[str, float]:
        found = tally.means()
        return {key: found.get(f"{key}@{k}", 0.0) for key in keys}

    k = catalogs[0].k
    curve: list[tuple[int, dict[str, float]]] = []
    replayed = 0
    for step in range(CURVE + 1):
        tally = Tally({})
        for i, catalog in enumerate(catalogs):
            tenant = f"{run}:clean:{i}"
            end = len(catalog.traffic) * step // CURVE
            start = len(catalog.traffic) * (step - 1) // CURVE if step else 0
            for request in catalog.traffic[start:end]:
                await learner.observe_run(tenant, *served_run(request, catalog, request.nodes))
            replayed += end - start
            score(catalog, await finder_of(learner, tenant, catalog), tally)
        curve.append((replayed, means(tally, k)))
        if progress:
            print(f"  {replayed} requests replayed: {curve[-1][1]}", flush=True)
    noisy, alone, mixed, other, differ = Tally({}), Tally({}), Tally({}), Tally({}), 0
    rng = random.Random(SEED)
    for i, catalog in enumerate(catalogs):
        tenant = f"{run}:noisy:{i}"
        for request in catalog.traffic:
            tools = request.nodes
            if rng.random() < noise:
                tools = wrong_tools(request, catalog.tools, rng)
            await learner.observe_run(tenant, *served_run(request, catalog, tools))
        score(catalog, await finder_of(learner, tenant, catalog), noisy)
        first, second = f"{run}:a:{i}", f"{run}:b:{i}"
        shuffled = list(catalog.tools)
        random.Random(SEED + i).shuffle(shuffled)
        mapping = dict(zip(catalog.tools, shuffled, strict=True))
        for request in catalog.traffic:
            await learner.observe_run(first, *served_run(request, catalog, request.nodes))
            conflicting = renamed(request, mapping)
            await learner.observe_run(second, *served_run(request, catalog, conflicting))
        clean = score(catalog, await finder_of(learner, f"{run}:clean:{i}", catalog), alone)
        beside = score(catalog, await finder_of(learner, first, catalog), mixed)
        score(catalog, await finder_of(learner, second, catalog), other)
        differ += sum(1 for a, b in zip(clean, beside, strict=True) if a != b)
    return {
        "k": k,
        "traffic": sum(len(c.traffic) for c in catalogs),
        "scored": sum(len(c.later) for c in catalogs),
        "before": curve[0][1],
        "after": curve[-1][1],
        "noisy": means(noisy, k),
        "noise": noise,
        "prior_strength": learner.options.prior_strength,
        "isolation": {
            "tenant_a_alone": means(alone, k),
            "tenant_a_beside_b": means(mixed, k),
            "plans_that_differ": differ,
            "tenant_b_conflicting": means(other, k),
        },
        "curve": [{"replayed": n, **scores} for n, scores in curve],
    }


# --- the sets -------------------------------------------------------------------------


def ultratool(folder: Path) -> list[tuple[str, Dataset]]:
    return [("ultratool", load_dataset(folder))]


def trained_catalogs(folder: Path) -> list[tuple[str, Dataset]]:
    """CallNavi's domains, API-Bank and ToolTalk as ``eval.plan_trust`` reads them, each
    catalog with its schema edges only (no call sequence: traffic is the only source)."""
    from eval.plan_trust import _request, load_api_bank, load_domains, load_tooltalk
    from graph_store.edges.schema_deps import schema_edges
    from graph_store.embedded import InProcessStore

    catalogs = {
        **load_domains(folder / "callnavi"),
        **load_api_bank(folder / "api_bank"),
        **load_tooltalk(folder / "tooltalk"),
    }
    found = []
    for name, (tools, questions) in catalogs.items():
        if len(questions) < 4:
            continue
        store = InProcessStore()
        store.upsert_tools(tools)
        store.upsert_edges(schema_edges(tools))
        by_name = {t.original_name: t.name for t in tools}
        requests = [_request(q, by_name) for q in questions]
        found.append((name, Dataset(name, tools, store, requests)))
    return found


def prepared(
    data: Dataset, encoder: Encoder, settings: Settings, cache: Path | None, progress: bool
) -> Catalog:
    from proxy.plan.candidates import KEEP_RETRIEVED, weights_from
    from retriever.bulk import embed_documents

    index = build_index(
        data, encoder, cache_dir=cache, progress=progress, config=settings.retriever
    )
    planner = settings.planner
    finder = plan_finder(
        data,
        index,
        encoder,
        settings.retriever,
        weights_from(planner),
        planner.graph_mode,
        KEEP_RETRIEVED,
    )
    texts = sorted({t.text for r in data.requests for t in r.subtasks})
    matrix = embed_documents(encoder, texts, cache_dir=cache, progress=progress, label="sub-tasks")
    traffic, later = split_in_time(data.requests)
    return Catalog(
        data,
        traffic,
        later,
        finder,
        finder.text_order(encoder),
        {text: matrix[i] for i, text in enumerate(texts)},
        planner.top_k,
        planner.beam,
        sorted(t.name for t in data.tools),
    )


LOADERS: dict[str, Callable[[argparse.Namespace], list[tuple[str, Dataset]]]] = {
    "ultratool": lambda args: ultratool(args.ultratool),
    "trained": lambda args: trained_catalogs(args.train),
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ultratool", type=Path, default=dataset("ultratool"))
    parser.add_argument("--train", type=Path, default=dataset("train"))
    parser.add_argument("--sets", default=",".join(LOADERS), help="comma-separated")
    parser.add_argument("--noise", type=float, default=NOISE)
    parser.add_argument("--redis-url", help="keep the learned counts in this Redis")
    parser.add_argument(
        "--prior-strength",
        type=float,
        default=LearningSettings().prior_strength,
        help="learning.prior_strength (the shipped default unless given)",
    )
    parser.add_argument("--json", type=Path, default=Path("eval/results/learning_replay.json"))
    parser.add_argument("--plot", type=Path, default=Path("eval/results/learning_replay.png"))
    parser.add_argument("--cache-dir", type=Path, default=Path(".cache/embeddings"))
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    from retriever.embedder import load_encoder

    settings = Settings()
    encoder = load_encoder(settings.retriever)
    # each set run replaces its own rows in the file, so sets can be run one at a time
    results: dict[str, object] = json.loads(args.json.read_text()) if args.json.is_file() else {}
    started = time.perf_counter()
    for name in [n.strip() for n in args.sets.split(",") if n.strip()]:
        sets = LOADERS[name](args)
        progress = not args.quiet
        catalogs = [prepared(d, encoder, settings, args.cache_dir, progress) for _, d in sets]
        print(f"{name}: {len(catalogs)} catalog(s)", flush=True)
        found = asyncio.run(run_set(catalogs, args, progress))
        found["seconds"] = round(time.perf_counter() - started, 1)
        results[name] = found
        print(json.dumps(found, indent=1), flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2) + "\n")
    plot(results, args.plot)
    print(f"wrote {args.json} and {args.plot}")
    return 0


async def run_set(
    catalogs: Sequence[Catalog], args: argparse.Namespace, progress: bool
) -> dict[str, object]:
    """:func:`replay_set` over the in-process store, or over Redis at ``--redis-url``."""
    options = LearningSettings(enabled=True, prior_strength=args.prior_strength)
    if args.redis_url is None:
        store = open_learned_store(None, options.max_entries, options.max_tenants)
        return await replay_set(catalogs, store, args.noise, progress, options)
    from redis.asyncio import Redis

    redis = Redis.from_url(args.redis_url)
    try:
        store = open_learned_store(redis, options.max_entries, options.max_tenants)
        return await replay_set(catalogs, store, args.noise, progress, options)
    finally:
        await redis.aclose()


def plot(results: dict[str, object], path: Path) -> None:
    """Link F1 of the later half against requests replayed, one line per set."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6.4, 4.0))
    for name, found in results.items():
        if not isinstance(found, dict):
            continue
        points = found["curve"]
        (line,) = axes.plot(
            [p["replayed"] for p in points],
            [p["link_f1"] for p in points],
            marker="o",
            label=f"{name}: link F1@{found['k']}",
        )
        axes.axhline(found["noisy"]["link_f1"], linestyle=":", color=line.get_color())
    axes.set_xlabel("requests replayed (first half of the set)")
    axes.set_ylabel("later half, percent")
    axes.set_title("Plan link F1 while learning from traffic (dotted: 20 % wrong signal)")
    axes.legend()
    axes.grid(alpha=0.3)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)


if __name__ == "__main__":
    raise SystemExit(main())
