"""Fit how far the planner trusts each kind of graph edge, on training data only.

``python -m eval.plan_trust`` reads four training sets with ordered calls, each a
set of catalogs (``../shared/data/train``):

* CallNavi: ten domains of enterprise APIs with ``returns`` schemas, 272 questions
  that call two to five APIs in order;
* API-Bank: the 53 level-1/2 APIs (``output_parameters``), the queries that call two
  or more of them (``GetUserToken`` before what needs the token);
* ToolTalk: 28 APIs of 7 suites (``output``), each conversation's API requests in order;
* BFCL multi-turn base: the functions of its eight API classes (``response``), each
  turn's ground-truth calls in order (a conversation's turns in one fold);

and writes ``proxy/plan/edge_trust.json``:

* each catalog's type-compatibility edges (STRONG_DEP / WEAK_DEP) come from the schema
  rule pass, its SEQUENTIAL edges from the call sequences of one half of its questions
  (two folds, split by a hash of the question id);
* the *coverage* of a kind is the share of the other half's transitions A → B, pooled
  over every source, that follow a kind edge out of A (each source's own share is
  printed beside it);
* the rank-prior *decay* is the value on a grid that gives the best link F1 at K = 5
  (candidate recall breaking ties) with the LLM-free policy over the other half;
* *order* is the log-odds that a held-out transition A → B has B's clause later in
  the question than A's rather than earlier (proxy/plan/order.py), counted over the
  held-out questions with the same clause split and positions the planner uses.

None of the planning sets reported in proxy/plan/README.md (UltraTool, TaskBench) is
read here.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import JsonValue
from tqdm import tqdm

from eval.data_folder import dataset
from eval.plan_data import Dataset, Request, Tally, score_plan
from graph_store.edges.schema_deps import schema_edges
from graph_store.embedded import InProcessStore
from graph_store.models import ALL_KINDS, Edge, EdgeKind, Provenance, Tool
from graph_store.names import normalise_name, tool_id
from graph_store.store import neighbors
from proxy.plan.model import Plan, SubTask
from proxy.plan.trust import DEFAULT_PATH, EdgeTrust

DECAYS = (0.25, 0.5, 1.0, 1.5, 2.0, 3.0)
#: The decay under which ``sure`` is measured (the previous fit's).
FIRST_DECAY = 2.0
#: Coverage of the edges a catalog declares (its own graph file): not fitted, since no
#: training set comes with a declared graph; taken at its word, and discounted like
#: every edge by ``sure``, the share of the picks it leaves from that are right.
DECLARED = 1.0
K = 5


#: A catalog's questions: ``{"_id", "text", "gold_apis": [names in call order]}``.
Question = dict[str, Any]
Catalogs = dict[str, tuple[list[Tool], list[Question]]]


def load_domains(folder: Path) -> Catalogs:
    """CallNavi, per domain: its tools and its questions that call two or more of them."""
    tools: dict[str, list[Tool]] = {}
    for row in _lines(folder / "corpus.jsonl"):
        tools.setdefault(row["domain"], []).append(
            _tool("callnavi", row["domain"], row["domain"], row, row.get("returns"))
        )
    questions: dict[str, list[Question]] = {}
    for row in _lines(folder / "queries.jsonl"):
        questions.setdefault(row["domain"], []).append(row)
    return {f"callnavi/{d}": _chains(tools[d], questions.get(d, [])) for d in sorted(tools)}


def load_api_bank(folder: Path) -> Catalogs:
    """API-Bank's level-1/2 APIs and the queries that call two or more of them."""
    tools = [
        _tool("api_bank", "api_bank", "api_bank", row, row.get("output_parameters"))
        for row in _lines(folder / "corpus.jsonl")
        if row.get("api_set") == "lv1-lv2"
    ]
    questions = [
        {"_id": row["_id"], "text": row["text"], "gold_apis": row.get("calls") or []}
        for row in _lines(folder / "queries.jsonl")
    ]
    return {"api_bank": _chains(tools, questions)}


def load_tooltalk(folder: Path) -> Catalogs:
    """ToolTalk's APIs (one catalog, suites as groups) and each conversation's calls."""
    tools = [
        _tool("tooltalk", "tooltalk", row["suite"], row, row.get("output"))
        for row in _lines(folder / "corpus.jsonl")
    ]
    questions = []
    for row in _lines(folder / "conversations.jsonl"):
        turns = row.get("conversation") or []
        text = " ".join(t["text"] for t in turns if t.get("role") == "user")
        calls = [a["request"]["api_name"] for t in turns for a in t.get("apis") or []]
        questions.append({"_id": row["conversation_id"], "text": text, "gold_apis": calls})
    return {"tooltalk": _chains(tools, questions)}


#: BFCL's multi-turn classes and the files of their functions.
BFCL_CLASSES = {
    "GorillaFileSystem": "gorilla_file_system",
    "MathAPI": "math_api",
    "MessageAPI": "message_api",
    "TwitterAPI": "posting_api",
    "TicketAPI": "ticket_api",
    "TradingBot": "trading_bot",
    "TravelAPI": "travel_booking",
    "VehicleControlAPI": "vehicle_control",
}


def load_bfcl_multi_turn(folder: Path) -> Catalogs:
    """BFCL's multi-turn base set: one catalog of its eight API classes (120 functions,
    the class as the group), and each turn's ground-truth calls in order (the turn's
    user message as the text; a conversation's turns stay in one fold)."""
    tools = [
        _tool("bfcl", "bfcl_multi_turn", cls, row, (row.get("response") or {}).get("properties"))
        for cls, stem in BFCL_CLASSES.items()
        for row in _lines(folder / "multi_turn_func_doc" / f"{stem}.json")
    ]
    answers = {
        row["id"]: row["ground_truth"]
        for row in _lines(folder / "possible_answer" / "BFCL_v4_multi_turn_base.json")
    }
    questions = []
    for row in _lines(folder / "BFCL_v4_multi_turn_base.json"):
        turns = zip(row["question"], answers[row["id"]], strict=True)
        for turn, (messages, calls) in enumerate(turns):
            text = " ".join(m["content"] for m in messages if m.get("role") == "user")
            names = [call.split("(", 1)[0].strip() for call in calls]
            questions.append(
                {"_id": f"{row['id']}/{turn}", "fold": row["id"], "text": text, "gold_apis": names}
            )
    return {"bfcl_multi_turn": _chains(tools, questions)}


def _chains(tools: list[Tool], questions: list[Question]) -> tuple[list[Tool], list[Question]]:
    """The questions whose calls are all catalog tools and change tool at least once."""
    known = {t.original_name for t in tools}
    kept = []
    for q in questions:
        calls = [c for c, _ in itertools.groupby(q.get("gold_apis") or [])]
        if len(calls) >= 2 and all(c in known for c in calls):
            kept.append({**q, "gold_apis": calls})
    return tools, kept


def _tool(source: str, catalog: str, group: str, row: dict[str, Any], returns: object) -> Tool:
    fields = returns if isinstance(returns, dict) else {}
    properties: dict[str, JsonValue] = {
        str(k): {"type": _type(v.get("type", v) if isinstance(v, dict) else v)}
        for k, v in fields.items()
    }
    parameters = row.get("parameters")
    return Tool(
        id=tool_id(source, catalog, row["name"]),
        name=normalise_name(row["name"]),
        original_name=row["name"],
        description=row.get("description", ""),
        category=catalog,
        group=group,
        parameters=parameters if isinstance(parameters, dict) else {"type": "object"},
        response_schema={"type": "object", "properties": properties},
        provenance=Provenance(
            format=source, file="corpus.jsonl", item=str(row.get("_id", row["name"]))
        ),
    )


def _type(word: object) -> str:
    text = str(word).lower()
    return next((t for t in ("integer", "number", "boolean", "array", "object") if t in text),
                "string")  # fmt: skip


def fold_of(question_id: str) -> int:
    return hashlib.sha256(question_id.encode()).digest()[0] % 2


def _fold(question: Question) -> int:
    """A question's fold: by its conversation where it has one, else by its id."""
    return fold_of(str(question.get("fold", question["_id"])))


def sequential_edges(tools: Sequence[Tool], questions: Iterable[dict[str, Any]]) -> list[Edge]:
    by_name = {t.original_name: t.id for t in tools}
    pairs: Counter[tuple[str, str]] = Counter()
    for q in questions:
        calls = [by_name[c] for c in q["gold_apis"]]
        pairs.update((a, b) for a, b in itertools.pairwise(calls) if a != b)
    leaving: Counter[str] = Counter()
    for (src, _), count in pairs.items():
        leaving[src] += count
    return [
        Edge(src=s, dst=d, kind=EdgeKind.SEQUENTIAL, weight=n / leaving[s], count=n, origin="calls")
        for (s, d), n in sorted(pairs.items())
    ]


def fold_dataset(
    domain: str, tools: list[Tool], questions: list[dict[str, Any]], held: int
) -> Dataset:
    """The catalog with schema edges and the other fold's sequences; ``held``'s questions."""
    store = InProcessStore()
    store.upsert_tools(tools)
    store.upsert_edges(schema_edges(tools))
    store.upsert_edges(sequential_edges(tools, [q for q in questions if _fold(q) != held]))
    by_name = {t.original_name: t.name for t in tools}
    requests = [_request(q, by_name) for q in questions if _fold(q) == held]
    return Dataset(f"{domain}/{held}", tools, store, requests)


def _request(q: dict[str, Any], by_name: dict[str, str]) -> Request:
    names = [by_name[c] for c in q["gold_apis"]]
    subtasks = [
        SubTask(id=f"s{i + 1}", text=q["text"], needs=(f"s{i}",) if i else ())
        for i in range(len(names))
    ]
    links = sorted({(a, b) for a, b in itertools.pairwise(names) if a != b})
    return Request(q["_id"], q["text"], "chain", names, links, subtasks)


def coverage(datasets: Sequence[Dataset]) -> dict[EdgeKind, float]:
    """Share of held-out transitions that follow an edge of each kind, pooled."""
    hits: Counter[EdgeKind] = Counter()
    total = 0
    for data in datasets:
        ids = {t.name: t.id for t in data.tools}
        for request in data.requests:
            for a, b in request.links:
                total += 1
                for kind in ALL_KINDS:
                    reached = {n.tool_id for n in neighbors(data.store, [ids[a]], [kind])}
                    hits[kind] += ids[b] in reached
    return {kind: round(hits[kind] / max(1, total), 3) for kind in ALL_KINDS}


def score(
    datasets: Sequence[Dataset], trust: EdgeTrust, encoder: Any, cache: Path
) -> dict[str, float]:
    """The LLM-free policy's scores over the held-out folds, and ``sure``: the share of
    the picks for sub-tasks that others need which are right."""
    tally = Tally({})
    for data in datasets:
        for request, plan in plans(data, trust, encoder, cache):
            score_plan(plan, request, tally, K)
            needed = {need for task in request.subtasks for need in task.needs}
            for task, gold in zip(request.subtasks, request.nodes, strict=True):
                if task.id in needed:
                    tally.add("sure", float(plan.choices.get(task.id) == gold))
    return tally.means()


def order_counts(datasets: Sequence[Dataset], encoder: Any, cache: Path) -> Counter[int]:
    """Held-out transitions A → B by the sign of (B's clause - A's clause) in the text."""
    from eval.plan_catalog import build_index
    from proxy.plan.order import TextOrder

    counts: Counter[int] = Counter()
    for data in datasets:
        if not data.requests:
            continue
        order = TextOrder(encoder, build_index(data, encoder, cache_dir=cache, progress=False), 1)
        ids = {t.name: t.id for t in data.tools}
        for request in data.requests:
            counts.update(order.sign(request.text, ids[a], ids[b]) for a, b in request.links)
    return counts


def order_nats(counts: Counter[int]) -> float:
    """log(P(later) / P(earlier)), add-one smoothed, never below 0."""
    return round(max(0.0, math.log((counts[1] + 1) / (counts[-1] + 1))), 3)


def plans(
    data: Dataset, trust: EdgeTrust, encoder: Any, cache: Path
) -> Iterator[tuple[Request, Plan]]:
    """The LLM-free policy's plan for each held-out request of ``data``."""
    from eval.plan_catalog import build_index
    from proxy.plan.candidates import CandidateFinder
    from proxy.plan.policy import plan_without_llm
    from retriever.bulk import embed_documents

    texts = sorted({r.text for r in data.requests})
    if not texts:
        return
    index = build_index(data, encoder, cache_dir=cache, progress=False)
    finder = CandidateFinder(data.store, index, mode="rerank", trust=trust)
    order = finder.text_order(encoder)
    matrix = embed_documents(encoder, texts, cache_dir=cache, progress=False, label="")
    vector_of = {text: matrix[i] for i, text in enumerate(texts)}
    for request in data.requests:
        vectors = {t.id: vector_of[t.text] for t in request.subtasks}
        yield request, plan_without_llm(finder, request.subtasks, vectors, K, beam=2, order=order)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=dataset("train"),
                        help="callnavi/, api_bank/, tooltalk/ and bfcl/ are read")  # fmt: skip
    parser.add_argument("--out", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--cache-dir", type=Path, default=Path(".cache/embeddings"))
    args = parser.parse_args(argv)
    from retriever.config import RetrieverConfig
    from retriever.embedder import load_encoder

    catalogs = {
        **load_domains(args.data / "callnavi"),
        **load_api_bank(args.data / "api_bank"),
        **load_tooltalk(args.data / "tooltalk"),
        **load_bfcl_multi_turn(args.data / "bfcl"),
    }
    datasets = [
        fold_dataset(d, tools, qs, held)
        for d, (tools, qs) in catalogs.items()
        for held in (0, 1)
        if qs
    ]
    for source in ("callnavi", "api_bank", "tooltalk", "bfcl_multi_turn"):
        mine = [d for d in datasets if d.name.split("/")[0] == source]
        transitions = sum(len(r.links) for d in mine for r in d.requests)
        mine_shares = {k.value: v for k, v in coverage(mine).items()}
        print(f"{source}: {transitions} held-out transitions, coverage {mine_shares}")
    shares = coverage(datasets)
    print("coverage of held-out transitions:", {k.value: v for k, v in shares.items()})
    encoder = load_encoder(RetrieverConfig())
    alone = score(datasets, EdgeTrust({}, FIRST_DECAY), encoder, args.cache_dir)
    print(f"retrieval alone: recall@{K} {alone[f'candidate_recall@{K}']}, "
          f"link F1 {alone[f'link_f1@{K}']}")  # fmt: skip
    first = score(datasets, EdgeTrust(shares, FIRST_DECAY), encoder, args.cache_dir)
    sure = round(first["sure"] / 100, 3)
    print(f"picks that others need, right: {sure} (decay {FIRST_DECAY}, sure 1)")
    results = {}
    for decay in tqdm(DECAYS, desc="decay"):
        trust = EdgeTrust(shares, decay, DECLARED, sure)
        results[decay] = score(datasets, trust, encoder, args.cache_dir)
        print(f"decay {decay}: recall@{K} {results[decay][f'candidate_recall@{K}']}, "
              f"link F1 {results[decay][f'link_f1@{K}']}")  # fmt: skip
    best = max(
        DECAYS, key=lambda d: (results[d][f"link_f1@{K}"], results[d][f"candidate_recall@{K}"])
    )
    counts = order_counts(datasets, encoder, args.cache_dir)
    nats = order_nats(counts)
    print(f"clause order of held-out transitions: later {counts[1]}, same {counts[0]}, "
          f"earlier {counts[-1]}: order {nats} nats")  # fmt: skip
    trust = EdgeTrust(shares, best, DECLARED, sure, nats)
    ordered = score(datasets, trust, encoder, args.cache_dir)
    print(f"with order: recall@{K} {ordered[f'candidate_recall@{K}']}, "
          f"link F1 {ordered[f'link_f1@{K}']}")  # fmt: skip
    args.out.write_text(json.dumps(trust.to_json(), indent=2, sort_keys=True) + "\n")
    print(f"chose decay {best}; wrote {args.out}")
    return 0


def _lines(path: Path) -> Iterable[dict[str, Any]]:
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)


if __name__ == "__main__":
    raise SystemExit(main())
