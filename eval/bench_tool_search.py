"""Select mode over a conversation: prompt tokens, the upstream's reusable prefix and tool
recall per turn, for three ways of handing a model a long tool list.

    python -m eval.bench_tool_search [--tools 300] [--turns 10] [--json FILE] [--plot FILE]

Each conversation is ten CallNavi questions of one domain asked in turn (the assistant
answers each with a line), over a list of ``--tools`` tools: the domain's own, then the
other domains', then Gorilla API Zoo documents to fill larger lists. The arms:

* ``all``: every tool forwarded every turn (what a client does without toolgraph);
* ``select``: select mode with ``retriever.select_keep_loaded`` off, a fresh selection
  each turn;
* ``keep``: select mode as shipped, the conversation's tools kept in load order.

Nothing goes upstream: each turn's forwarded body is what select mode's rewrite returns,
the numbers are computed from it exactly. ``prompt tokens`` are cl100k tokens of the
tools and messages as JSON (the bundled tiktoken file that litellm ships); ``prefix``
is the share of a turn's serialized prompt (tools, then messages, as chat templates lay
them out) that repeats the previous turn's from its first byte, which is what a prefix
cache can reuse; ``recall`` is the share of a turn's gold tools that were forwarded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval.data_folder import dataset

ARMS = ("all", "select", "keep")
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

    def summary(self) -> dict[str, float]:
        later = [v for turns in self.prefix for v in turns[1:]]  # turn 1 has no previous
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


def _prefix_share(previous: bytes, current: bytes) -> float:
    same = 0
    for a, b in zip(previous, current, strict=False):
        if a != b:
            break
        same += 1
    return same / len(current)


async def run_arm(arm: str, talks: list[Conversation], encoding: Any) -> ArmResult:
    from proxy.config import load_settings
    from proxy.context import RequestContext
    from proxy.encoder.service import EncoderService
    from proxy.protocol.chat import parse_request
    from proxy.select.service import SelectService

    settings = load_settings()
    config = settings.retriever.model_copy(update={"select_keep_loaded": arm == "keep"})
    encoders = EncoderService(config)
    select = SelectService(config, encoders)
    result = ArmResult()
    try:
        for n, talk in enumerate(talks):
            messages: list[dict[str, Any]] = [{"role": "system", "content": "You are helpful."}]
            previous = b""
            tokens, prefix, recall = [], [], []
            for text, gold in talk.questions:
                messages.append({"role": "user", "content": text})
                body: dict[str, Any] = {"model": "m", "messages": messages, "tools": talk.tools}
                if arm != "all":
                    body["toolgraph"] = {"mode": "select"}
                    context = RequestContext(request_id=f"bench-{n}", client_key="bench")
                    body = await select.rewrite(parse_request(body), body, context)
                tools = body.get("tools") or []
                prompt = json.dumps(tools).encode() + json.dumps(messages).encode()
                tokens.append(len(encoding.encode(prompt.decode())))
                prefix.append(_prefix_share(previous, prompt))
                names = {tool["function"]["name"] for tool in tools}
                recall.append(len(gold & names) / len(gold))
                previous = prompt
                messages = [*messages, {"role": "assistant", "content": ANSWER}]
            result.tokens.append(tokens)
            result.prefix.append(prefix)
            result.recall.append(recall)
            print(f"  {arm}: conversation {n + 1}/{len(talks)} ({talk.domain})", file=sys.stderr)
    finally:
        encoders.close()
    return result


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
    parser.add_argument("--json", type=Path, help="write the summary here")
    parser.add_argument("--plot", type=Path, help="write a PNG of the per-turn means here")
    args = parser.parse_args(argv)
    if args.tools < 1 or args.turns < 1:
        parser.error("--tools and --turns must be at least 1")
    talks = conversations(args.tools, args.turns)
    encoding = _tokens()
    results = {arm: asyncio.run(run_arm(arm, talks, encoding)) for arm in ARMS}
    summary = {arm: result.summary() for arm, result in results.items()}
    summary_all = summary["all"]["prompt_tokens_per_turn"]
    for arm, row in summary.items():
        share = 100 * row["prompt_tokens_per_turn"] / summary_all
        print(
            f"{arm:7} tokens/turn {row['prompt_tokens_per_turn']:9.1f} ({share:5.1f} % of all)  "
            f"uncached {row['uncached_tokens_per_turn']:8.1f}  "
            f"prefix {row['prefix_share']:5.1f} %  recall {row['recall']:5.1f} %"
        )
    report = {"tools": args.tools, "turns": args.turns, "conversations": len(talks), **summary}
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    if args.plot:
        plot(results, args.plot, args.tools)


if __name__ == "__main__":
    main()
