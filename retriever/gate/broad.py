"""Rows against broad catalogs: a few hundred tools across many domains.

The other rows pair a request with one source's catalog (BFCL's few functions, a
retrieval set's tools, CLINC150's intents): narrow catalogs, where a request that
needs no tool rarely finds a close tool. In a broad catalog almost any request has
one ("What wine goes well with fish?" and a recipe tool), and a gate fitted on narrow
catalogs alone sent every request to the tools there. So each retrieval set's
tool requests are asked again against a broad catalog holding their gold tools, and
the requests that need no tool (chit-chat, NQ-open, templates, CLINC150's small talk)
against broad catalogs drawn the same way. A broad catalog is :data:`SIZE` tools drawn
(seeded) across the union of the eight retrieval sets' catalogs and the BFCL, ACEBench
and When2Call function lists, as evenly as the sets allow.

Like :mod:`~retriever.gate.augment`'s rows they are made, not given: trained on with
their source's share (``train.Options.augmented_weight``), left out with it, never
scored. A few broad catalogs may hold a tool that would serve a "no tool" request
(NQ-open's questions and a search tool; noise, weighing like any row).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from retriever.gate.data import GateRow
from retriever.gate.retrieval_rows import RETRIEVAL_SOURCES

#: Tools of a broad catalog (the unseen tool-awareness set offers about 200).
SIZE = 200
#: Broad catalogs the "no tool" requests are paired with.
CATALOGS = 12
#: Tool requests of each retrieval set asked again against a broad catalog.
PER_SET = 100
#: The "no tool" sources asked against broad catalogs, and CLINC150's small talk.
NO_TOOL_SOURCES = ("chitchat", "nq_open", "templates")
BROAD_TOOL = "broad_tool_call"
BROAD_NONE = "broad_no_tool"


def broad_rows(
    rows: Sequence[GateRow], gold: Mapping[tuple[str, str], tuple[str, ...]], seed: int = 13
) -> list[GateRow]:
    """Made rows against broad catalogs: up to :data:`PER_SET` tool requests of each
    retrieval set whose gold tools (``gold``: by set and query id) are known, with those
    tools in the catalog, and every row of the "no tool" sources once more."""
    draw = random.Random(f"{seed}:broad")
    groups = _tool_groups(rows)
    made: list[GateRow] = []
    for source in RETRIEVAL_SOURCES:
        requests = [
            r
            for r in rows
            if r.source == source and r.category == "tool_call" and gold.get((source, r.id))
        ]
        needed: dict[str, None] = {}
        asked: list[GateRow] = []
        for row in requests:
            if len(asked) == PER_SET or len(needed) + len(gold[source, row.id]) > SIZE // 2:
                break
            needed.update(dict.fromkeys(gold[source, row.id]))
            asked.append(row)
        catalog = _catalog(groups, draw, tuple(needed), exclude=source)
        made += [row.made(catalog, BROAD_TOOL, needs_tool=True) for row in asked]
    catalogs = [_catalog(groups, draw) for _ in range(CATALOGS)]
    for row in rows:
        if _needs_none(row):
            made.append(row.made(draw.choice(catalogs), BROAD_NONE, needs_tool=False))
    return made


def _needs_none(row: GateRow) -> bool:
    if row.augmented or row.needs_tool or not row.catalog:
        return False
    return row.source in NO_TOOL_SOURCES or (
        row.source == "clinc150" and row.category == "chitchat"
    )


def _tool_groups(rows: Sequence[GateRow]) -> dict[str, list[str]]:
    """The distinct tool documents of each source's own catalogs (CLINC150's intents left
    out: they are not tools a client sends)."""
    groups: dict[str, dict[str, None]] = {}
    for row in rows:
        if row.augmented or row.source == "clinc150" or not row.needs_tool:
            continue
        groups.setdefault(row.source, {}).update(dict.fromkeys(row.catalog))
    return {source: list(found) for source, found in sorted(groups.items())}


def _catalog(
    groups: dict[str, list[str]],
    draw: random.Random,
    keep: tuple[str, ...] = (),
    exclude: str = "",
) -> tuple[str, ...]:
    """``keep`` and tools drawn evenly from every group but ``exclude``, :data:`SIZE`
    in all."""
    chosen = dict.fromkeys(keep)
    others = [list(tools) for source, tools in groups.items() if source != exclude]
    for tools in others:
        draw.shuffle(tools)
    while len(chosen) < SIZE and any(others):
        for tools in others:
            if tools and len(chosen) < SIZE:
                chosen.setdefault(tools.pop(), None)
    return tuple(sorted(chosen))
