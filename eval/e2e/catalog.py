"""The catalogs the tasks run over: the built-in pack hidden among ToolBench distractors.

A catalog of size N is the five built-in tools, the task tools of BFCL's
executable tasks (:mod:`eval.e2e.bfcl`, five) and the first N - 10 of one seeded
shuffle of ToolBench's APIs (``toolbench_stable/corpus.jsonl.gz``), so the
distractors of a smaller catalog are those of every larger one. APIs whose name or
description speaks of calculation, math or physics are left out: those would be
other tools for the same job that cannot run offline, and a pick of one would say
nothing about either arm. Nameless or undescribed APIs are left out too.

The pack suite (:mod:`eval.e2e.packs`) passes the demo packs' 15 tools as ``extra``
in place of BFCL's: its catalog of N is the built-ins, those 15 and N - 20
distractors of the same pool, so N is still the number of tools offered.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from pydantic import JsonValue

from graph_store.embedded import InProcessStore
from graph_store.ingest.toolbench import parse_corpus
from graph_store.models import Tool
from proxy.tools.packs.math.catalog import builtin_tools

SEED = 19  # the number: any fixed seed will do
_ON_TOPIC = re.compile(
    r"calcul|math|integra|derivat|vector|physic|formula|equation|arithmetic|convert|unit",
    re.IGNORECASE,
)


@cache
def distractor_pool(corpus: Path) -> tuple[Tool, ...]:
    """Every usable ToolBench API in one seeded order."""
    tools = [tool for tool in parse_corpus(corpus).tools if _usable(tool)]
    tools.sort(key=lambda tool: tool.id)  # the corpus order must not matter
    random.Random(SEED).shuffle(tools)
    return tuple(tools)


def _usable(tool: Tool) -> bool:
    text = f"{tool.name} {tool.description}"
    return (
        tool.name.isascii()
        and len(tool.description) >= 20
        and tool.description.isascii()
        and not _ON_TOPIC.search(text)
    )


def catalog(size: int, corpus: Path, extra: Sequence[Tool] = ()) -> list[Tool]:
    """The built-in tools, the ``extra`` task tools and distractors up to ``size``."""
    tools = builtin_tools() + list(extra)
    if size < len(tools):
        raise ValueError(f"a catalog holds at least the {len(tools)} task tools")
    return tools + list(distractor_pool(corpus)[: size - len(tools)])


def seed_store(directory: Path, tools: list[Tool]) -> None:
    """Write ``tools`` into the in-process graph store a proxy with ``data_dir =
    directory`` opens (the built-ins are seeded there again, unchanged)."""
    store = InProcessStore.open(directory / "graph")
    try:
        store.upsert_tools(tools)
    finally:
        store.close()


def openai_tools(tools: list[Tool]) -> list[dict[str, JsonValue]]:
    """The catalog as one request's ``tools``, built-ins first."""
    return [tool.openai_function() for tool in tools]
