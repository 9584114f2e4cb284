"""Select mode over a conversation: prompt tokens, the upstream's reusable prefix and tool
recall per turn, for three ways of handing a model a long tool list.

    python -m eval.bench_tool_search [--tools 300] [--turns 10] [--json FILE] [--plot FILE]

Each conversation is ten CallNavi questions of one domain asked in turn (the assistant
answers each with a line), over a list of ``--tools`` tools: the domain's own, then the
other domains', then Gorilla API Zoo documents to fill larger lists. The arms:

* ``all``: every tool forwarded every turn (what a client does without toolgraph);
* ``select``: select mode with ``retriever.select_keep_loaded`` off, a fresh selection
  each turn;
* ``keep``: select mode with the conversation's tools kept in load order
  (``retriever.select_keep_loaded``), every turn adding its selection's new tools;
* ``keep_needed``: the same, but a turn whose best-ranked tool is loaded adds nothing
  (``retriever.select_add_when_needed``).

Each turn's forwarded body is what select mode's rewrite returns (timed: *rewrite ms*,
the p50 over every turn, the first turn's embedding of the list included; the arms share
one vector cache, so only the first select-mode arm of a run embeds the lists and the
questions, and its time is the one to compare across runs); it is then
sent to the fake upstream (:mod:`testing.fake_upstream`), whose prompt cache reports
``usage.prompt_tokens_details.cached_tokens`` from the prompts it saw before.
``prompt tokens`` are cl100k tokens of the tools and messages as JSON (the bundled
tiktoken file that litellm ships), laid out as chat templates lay them out (tools, then
messages: :func:`testing.fake_cache.prompt_text`); ``prefix`` is the share of a turn's
prompt that repeats the previous turn's from its first character, which is what a prefix
cache can reuse, and ``cached`` the upstream's cached tokens over its prompt tokens, both
over turns 2-10; ``recall`` is the share of a turn's gold tools that were forwarded;
``changed`` the share of turns 2-10 whose ``tools`` differ from the turn before, and
``needed`` the share whose gold tools were not all forwarded the turn before (a turn
that must change the tools to reach full recall).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import orjson

from eval.data_folder import dataset
from retriever.cache import LRUCache
from testing.fake_cache import PromptCache, prompt_text
from testing.fake_upstream import FakeUpstream

if TYPE_CHECKING:
    from proxy.select.service import SelectService

#: Each arm's settings over the shipped ones (None: every tool, no select mode).
ARMS: dict[str, dict[str, bool] | None] = {
    "all": None,
    "select": {"select_keep_loaded": False},
    "keep": {"select_keep_loaded": True, "select_add_when_needed": False},
    "keep_needed": {"select_keep_loaded": True, "select_add_when_needed": True},
}
ANSWER = "Done. Anything else?"


@dataclass
class Conversation:
    domain: str
    questions: list[tuple[str, set[str]]]  # text, gold tool names
    tools: list[dict[str, Any]]


@dataclass
class ArmResult:
    tokens: list[list[int]] = field(default_factory=list)  # per conversation, per turn
    prefix: list[list[float]] = field(default_factory=list)
    recall: list[list[float]] = field(default_factory=list)
    cached: list[list[int]] = field(default_factory=list)  # the upstream's cached_tokens
    changed: list[list[bool]] = field(default_factory=list)  # tools differ from the turn before
    needed: list[list[bool]] = field(default_factory=list)  # gold not all forwarded before
    rewrite_ms: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, float]:
        later = [v for turns in self.prefix for v in turns[1:]]  # turn 1 has no previous
        cached = sum(c for turns in self.cached for c in turns[1:])
        prompted = sum(t for turns in self.tokens for t in turns[1:])
        changed = [v for turns in self.changed for v in turns[1:]]
        needed = [v for turns in self.needed for v in turns[1:]]
        pairs = [
            (tokens, share)
            for c_tokens, c_shares in zip(self.tokens, self.prefix, strict=True)
            for tokens, share in zip(c_tokens, c_shares, strict=True)
        ]
        # A prefix cache serves the repeated share; the rest is computed afresh.
        uncached = statistics.mean(tokens * (1 - share) for tokens, share in pairs)
        return {
            "prompt_tokens_per_turn": round(statistics.mean(t for t, _ in pairs), 1),
            "uncached_tokens_per_turn": round(uncached, 1),
            "prefix_share": round(100 * statistics.mean(later), 1),
            "recall": round(100 * statistics.mean(v for c in self.recall for v in c), 1),
            "cached_share": round(100 * cached / prompted, 1) if prompted else 0.0,
            "changed_turns": round(100 * statistics.mean(changed), 1),
            "needed_turns": round(100 * statistics.mean(needed), 1),
            "rewrite_ms_p50": round(statistics.median(self.rewrite_ms), 2)
            if self.rewrite_ms
            else 0.0,
        }


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open() as lines:
        for line in lines:
            yield json.loads(line)


def _tool(row: dict[str, Any]) -> dict[str, Any]:
    name = "".join(c if c.isalnum() or c in "_-" else "_" for c in row["_id"])[:64]
    parameters = row.get("parameters")
    if not (isinstance(parameters, dict) and parameters.get("type") == "object"):
        parameters = {"type": "object", "properties": {}}
    description = str(row.get("description") or row.get("name") or "")[:1024]
    function = {"name": name, "description": description, "parameters": parameters}
    return {"type": "function", "function": function}


def conversations(size: int, turns: int) -> list[Conversation]:
    """One conversation per CallNavi domain with at least ``turns`` questions."""
    folder = dataset("train") / "callnavi"
    corpus = list(_jsonl(folder / "corpus.jsonl"))
    fill = list(_jsonl(dataset("train") / "gorilla_apizoo" / "corpus.jsonl"))
    names = {row["_id"]: _tool(row)["function"]["name"] for row in corpus}
    relevant: dict[str, set[str]] = {}
    for line in (folder / "qrels" / "train.tsv").read_text().splitlines()[1:]:
        query_id, tool_id, _ = line.split("\t")
        relevant.setdefault(query_id, set()).add(names[tool_id])
    domains: dict[str, list[tuple[str, set[str]]]] = {}
    for query in _jsonl(folder / "queries.jsonl"):
        if query["_id"] in relevant:
            domains.setdefault(query["domain"], []).append((query["text"], relevant[query["_id"]]))
    found = []
    for domain, questions in sorted(domains.items()):
        if len(questions) < turns:
            continue
        own = [_tool(row) for row in corpus if row["domain"] == domain]
        others = [_tool(row) for row in corpus if row["domain"] != domain]
        tools = (own + others + [_tool(row) for row in fill])[:size]
        found.append(Conversation(domain, questions[:turns], tools))
    return found


def _tokens() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm.litellm_core_utils.tokenizers as bundled
    import tiktoken

    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(Path(bundled.__file__).parent))
    return tiktoken.get_encoding("cl100k_base")


def _prefix_share(previous: str, current: str) -> float:
    same = 0
    for a, b in zip(previous, current, strict=False):
        if a != b:
            break
        same += 1
    return same / len(current)


async def run_arm(
    arm: str, talks: list[Conversation], upstream: FakeUpstream, vectors: LRUCache
) -> ArmResult:
    """One arm over every conversation; ``vectors``: the tools' embeddings, shared by the
    arms (the first arm to meet a list embeds it)."""
    from proxy.config import load_settings
    from proxy.encoder.service import EncoderService
    from proxy.select.service import SelectService

    settings = load_settings()
    update = ARMS[arm]
    config = settings.retriever.model_copy(update=update or {})
    encoders = EncoderService(config, embeddings=vectors)
    select = SelectService(config, encoders)
    upstream.prompt_cache.clear()
    result = ArmResult()
    try:
        async with httpx.AsyncClient(base_url=upstream.base_url, timeout=60) as client:
            for n, talk in enumerate(talks):
                await run_conversation(n, talk, select if update else None, client, result)
                print(
                    f"  {arm}: conversation {n + 1}/{len(talks)} ({talk.domain})", file=sys.stderr
                )
    finally:
        encoders.close()
    return result


async def run_conversation(
    n: int,
    talk: Conversation,
    select: SelectService | None,
    client: httpx.AsyncClient,
    result: ArmResult,
) -> None:
    """One conversation's turns: rewritten (unless ``select`` is None), sent upstream."""
    from proxy.context import RequestContext
    from proxy.protocol.chat import parse_request

    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are helpful."}]
    previous, previous_tools, before = "", None, set[str]()
    turns: dict[str, list[Any]] = {k: [] for k in ("tokens", "prefix", "recall", "cached")}
    changed, needed = [], []
    for text, gold in talk.questions:
        messages.append({"role": "user", "content": text})
        body: dict[str, Any] = {"model": "m", "messages": messages, "tools": talk.tools}
        if select is not None:
            body["toolgraph"] = {"mode": "select"}
            context = RequestContext(request_id=f"bench-{n}", client_key="bench")
            started = time.perf_counter()
            body = await select.rewrite(parse_request(body), body, context)
            result.rewrite_ms.append(1000 * (time.perf_counter() - started))
        usage = (await client.post("/chat/completions", json=body)).json()["usage"]
        tools = body.get("tools") or []
        prompt = prompt_text(body)
        names = {tool["function"]["name"] for tool in tools}
        turns["tokens"].append(usage["prompt_tokens"])
        turns["cached"].append(usage["prompt_tokens_details"]["cached_tokens"])
        turns["prefix"].append(_prefix_share(previous, prompt))
        turns["recall"].append(len(gold & names) / len(gold))
        forwarded = orjson.dumps(tools)
        changed.append(previous_tools is not None and forwarded != previous_tools)
        needed.append(not gold <= before)
        previous, previous_tools, before = prompt, forwarded, names
        messages = [*messages, {"role": "assistant", "content": ANSWER}]
    result.tokens.append(turns["tokens"])
    result.prefix.append(turns["prefix"])
    result.recall.append(turns["recall"])
    result.cached.append(turns["cached"])
    result.changed.append(changed)
    result.needed.append(needed)


def plot(results: dict[str, ArmResult], path: Path, size: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for arm, result in results.items():
        columns: list[list[list[float]]] = [
            [[float(v) for v in c] for c in result.tokens],
            result.prefix,
            result.recall,
        ]
        for index, series in enumerate(columns):
            means = [statistics.mean(c[i] for c in series) for i in range(len(series[0]))]
            axes[index].plot(range(1, len(means) + 1), means, label=arm)
    for ax, title in zip(axes, ("prompt tokens", "prefix share", "tool recall"), strict=True):
        ax.set_title(f"{title} per turn ({size} tools)")
        ax.set_xlabel("turn")
        ax.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=300, help="tools in each request's list")
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument(
        "--arms", default=",".join(ARMS), help="comma-separated, of " + ", ".join(ARMS)
    )
    parser.add_argument("--json", type=Path, help="write the summary here")
    parser.add_argument("--plot", type=Path, help="write a PNG of the per-turn means here")
    args = parser.parse_args(argv)
    arms = args.arms.split(",")
    if args.tools < 1 or args.turns < 1 or not set(arms) <= set(ARMS) or "all" not in arms:
        parser.error(
            "--tools and --turns must be at least 1; --arms must name 'all' and known arms"
        )
    talks = conversations(args.tools, args.turns)
    encoding = _tokens()
    load = os.getloadavg()[0]
    upstream = FakeUpstream(record=False)
    upstream.prompt_cache = PromptCache(lambda text: len(encoding.encode(text)))
    upstream.start()
    try:
        vectors = LRUCache(100_000)
        results = {arm: asyncio.run(run_arm(arm, talks, upstream, vectors)) for arm in arms}
    finally:
        upstream.stop()
    summary = {arm: result.summary() for arm, result in results.items()}
    summary_all = summary["all"]["prompt_tokens_per_turn"]
    for arm, row in summary.items():
        share = 100 * row["prompt_tokens_per_turn"] / summary_all
        print(
            f"{arm:11} tokens/turn {row['prompt_tokens_per_turn']:9.1f} ({share:5.1f} % of all)  "
            f"uncached {row['uncached_tokens_per_turn']:8.1f}  "
            f"prefix {row['prefix_share']:5.1f} %  cached {row['cached_share']:5.1f} %  "
            f"recall {row['recall']:5.1f} %  changed {row['changed_turns']:5.1f} %  "
            f"needed {row['needed_turns']:5.1f} %  rewrite p50 {row['rewrite_ms_p50']:.1f} ms"
        )
    load_end = os.getloadavg()[0]
    print(f"load average {load:.1f} -> {load_end:.1f}")
    report = {
        "tools": args.tools,
        "turns": args.turns,
        "conversations": len(talks),
        "load_average": [round(load, 1), round(load_end, 1)],
        **summary,
    }
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    if args.plot:
        plot(results, args.plot, args.tools)


if __name__ == "__main__":
    main()
