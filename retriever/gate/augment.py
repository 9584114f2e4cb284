"""Negatives made from requests that need a tool, by taking that tool away.

The gate's hardest out-of-source errors are near-miss catalogs: tools about the
request's subject, none of which does what it asks (When2Call removes the one tool
a request needs and keeps its siblings; BFCL's irrelevance rows offer one function
of a neighbouring task). The training sources hold few such rows (ACEBench's 50),
so the gate learned "a request that looks like a tool call needs a tool". Every
request whose gold answer names its tools gives one more row of that kind, labelled
"no tool": its catalog without the gold tools (CLINC150: the 134 other intents) or,
where the gold tool was all it was offered, another request's one-tool catalog of
the same source. Such rows are trained on, never scored: a held-out source's are
left out with it.

A few are mislabelled (another tool of the catalog could serve too, as CLINC150's
``balance`` could answer some ``bill_balance`` requests); their weight in the loss
is a share of their source's (``train.Options.augmented_weight``).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

from retriever.gate.data import GateRow

GOLD_REMOVED = "gold_removed"
CATALOG_SWAPPED = "catalog_swapped"


def augmented(rows: Sequence[GateRow], seed: int = 13) -> list[GateRow]:
    """One "no tool" row for each row that needs a tool and names its gold tools."""
    draw = random.Random(f"{seed}:augment")
    singles: dict[str, list[tuple[str, ...]]] = {}
    for row in rows:
        if len(row.catalog) == 1 and not row.augmented:
            singles.setdefault(row.source, []).append(row.catalog)
    return list(_negatives(rows, singles, draw))


def _negatives(
    rows: Sequence[GateRow], singles: dict[str, list[tuple[str, ...]]], draw: random.Random
) -> Iterator[GateRow]:
    for row in rows:
        if not row.needs_tool or not row.gold or row.augmented:
            continue
        rest = tuple(document for document in row.catalog if document not in row.gold)
        if rest:
            yield row.made(rest, GOLD_REMOVED, needs_tool=False)
            continue
        pool = singles.get(row.source, [])
        other = _other(pool, row, draw)
        if other is not None:
            yield row.made(other, CATALOG_SWAPPED, needs_tool=False)


def _other(
    pool: list[tuple[str, ...]], row: GateRow, draw: random.Random
) -> tuple[str, ...] | None:
    """A one-tool catalog of another request, holding none of ``row``'s gold tools."""
    for _ in range(5):
        if not pool:
            return None
        catalog = draw.choice(pool)
        if not set(catalog) & set(row.gold) and _name(catalog[0]) not in map(_name, row.gold):
            return catalog
    return None


def _name(document: str) -> str:
    return document.split(":", 1)[0].strip().lower()
