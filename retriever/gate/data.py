"""The gate's labelled requests (``train/gate``), each with the catalog it was asked against.

A row's label is relative to a catalog: BFCL, ACEBench and When2Call rows name the
functions offered with the request, whose descriptions come from the source files
(``train/bfcl``, ``train/acebench``, ``train/when2call``); CLINC150 rows are asked
against its intent catalogue (the ``small_talk`` domain left out: it holds no
tools). Chit-chat and NQ-open rows come with no catalog; each gets one drawn, with
a fixed seed, from the catalogs of the other sources, since a request that needs no
tool needs none whatever is offered.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from retriever.documents import function_fields, name_words
from retriever.gate.features import gate_document
from retriever.gate.negatives import template_requests
from retriever.gate.retrieval_rows import RETRIEVAL_SOURCES, retrieval_rows

TEMPLATES = "templates"

#: The six sources of ``train/gate``, in the order the README reports them.
GATE_SOURCES = ("bfcl", "when2call", "acebench", "clinc150", "chitchat", "nq_open")
#: Every source: the gate's six, the eight retrieval sets (tool requests against their own
#: catalogs and against others', :mod:`~retriever.gate.retrieval_rows`) and the requests
#: made from templates (:mod:`~retriever.gate.negatives`).
SOURCES = (*GATE_SOURCES, *RETRIEVAL_SOURCES, TEMPLATES)
#: Sources whose rows carry no catalog of their own.
UNPAIRED = ("chitchat", "nq_open", TEMPLATES)
SAMPLE = {"clinc150": 2000, "nq_open": 800}


@dataclass(frozen=True, slots=True)
class GateRow:
    id: str
    source: str  # the file: bfcl, when2call, …
    category: str
    query: str
    needs_tool: bool
    catalog: tuple[str, ...]  # tool document texts, as the gate embeds them
    #: The documents of the tools the gold answer calls (a subset of ``catalog``; empty
    #: where the source names none): what :mod:`~retriever.gate.augment` takes away.
    gold: tuple[str, ...] = ()
    augmented: bool = False  # made from another row (trained on, never scored)

    def made(self, catalog: tuple[str, ...], category: str, *, needs_tool: bool) -> GateRow:
        """This row's request against ``catalog``, labelled ``needs_tool``: a made row
        (:mod:`~retriever.gate.augment`, :mod:`~retriever.gate.broad`)."""
        return replace(
            self,
            id=f"{self.id}#{category}",
            category=category,
            needs_tool=needs_tool,
            catalog=catalog,
            gold=(),
            augmented=True,
        )


def load_rows(
    root: Path, seed: int = 13, sample: Mapping[str, int] = SAMPLE, *, retrieval: bool = True
) -> list[GateRow]:
    """The rows of ``root/gate`` with their catalogs' documents (``root`` is ``train/``),
    and with ``retrieval`` those of the retrieval sets and the templates.

    Of a source named in ``sample``, that many rows are drawn (seeded): CLINC150
    (23,700) and NQ-open (3,610) would otherwise outnumber the rest, and every row
    costs an embedding on a shared CPU.
    """
    functions = {
        **_bfcl_functions(root / "bfcl"),
        **_acebench_functions(root / "acebench" / "data_en"),
        **_when2call_functions(root / "when2call"),
    }
    golds = gold_names(root)
    clinc = _clinc_catalog(root / "gate" / "clinc150_intents.json")
    draw = random.Random(seed)
    rows: list[GateRow] = []
    for source in GATE_SOURCES:
        if source in UNPAIRED:
            continue
        for raw in _source_rows(root, source, sample, seed):
            if source == "clinc150":
                catalog = tuple(clinc.values())
                gold: tuple[str, ...] = (clinc.get(str(raw.get("intent")), ""),)
            else:
                offered = functions.get(str(raw["id"]), ())
                catalog = tuple(document for name, document in offered if name in raw["tools"])
                named = golds.get(str(raw["id"]), frozenset())
                gold = tuple(document for name, document in offered if name in named)
            rows.append(_row(raw, source, catalog, tuple(g for g in gold if g in catalog)))
    functions_only = sorted({r.catalog for r in rows if r.catalog and r.source != "clinc150"})
    if retrieval:
        for id, source, category, query, needs, catalog in retrieval_rows(
            root, functions_only, seed
        ):
            rows.append(GateRow(id, source, category, query, needs, catalog))
    pool = sorted({row.catalog for row in rows if row.catalog})
    for source in UNPAIRED:
        if source == TEMPLATES:
            if retrieval:
                for id, kind, query in template_requests(seed):
                    rows.append(GateRow(id, TEMPLATES, kind, query, False, draw.choice(pool)))
            continue
        for raw in _source_rows(root, source, sample, seed):
            rows.append(_row(raw, source, draw.choice(pool)))
    return rows


def _source_rows(
    root: Path, source: str, sample: Mapping[str, int], seed: int
) -> list[dict[str, Any]]:
    rows = list(_json_lines(root / "gate" / f"{source}.jsonl"))
    if source in sample:
        random.Random(f"{seed}:{source}").shuffle(rows)  # a smaller sample is a prefix
        rows = rows[: sample[source]]
    return rows


def _row(
    raw: dict[str, Any], source: str, catalog: tuple[str, ...], gold: tuple[str, ...] = ()
) -> GateRow:
    needs_tool = bool(raw["needs_tool"])
    return GateRow(
        id=str(raw["id"]),
        source=source,
        category=str(raw["category"]),
        query=str(raw["query"]),
        needs_tool=needs_tool,
        catalog=catalog,
        gold=gold if needs_tool else (),
    )


Offered = tuple[tuple[str, str], ...]  # (name, document text) per function


def _documents(functions: object) -> Offered:
    if not isinstance(functions, list):
        return ()
    return tuple(
        (str(f.get("name")), gate_document(function_fields(f, str(f.get("name")))))
        for f in functions
        if isinstance(f, dict)
    )


def _bfcl_functions(folder: Path) -> dict[str, Offered]:
    found: dict[str, Offered] = {}
    for path in [*folder.glob("BFCL_v4_*.json"), *folder.glob("unused_datasets/BFCL_v4_*.json")]:
        for entry in _json_lines(path):
            if "id" in entry:
                found[str(entry["id"])] = _documents(entry.get("function"))
    return found


def _acebench_functions(folder: Path) -> dict[str, Offered]:
    return {
        str(entry["id"]): _documents(entry.get("function"))
        for path in folder.glob("data_*.json")
        for entry in _json_lines(path)
    }


def _when2call_functions(folder: Path) -> dict[str, Offered]:
    found: dict[str, Offered] = {}
    for entry in _json_lines(folder / "when2call_test_llm_judge.jsonl"):
        tools = [json.loads(t) if isinstance(t, str) else t for t in entry.get("tools") or []]
        found[str(entry["uuid"])] = _documents(tools)
    return found


def _clinc_catalog(path: Path) -> dict[str, str]:
    """Intent name → its document, small talk left out."""
    intents = json.loads(path.read_text(encoding="utf-8"))["intents"]
    return {
        i["name"]: f"{name_words(i['name'])} ({name_words(i['domain'])})"
        for i in intents
        if i["domain"] != "small_talk"
    }


def gold_names(root: Path) -> dict[str, frozenset[str]]:
    """Row id → the names of the functions its gold answer calls (BFCL, ACEBench,
    When2Call; rows without a gold answer are absent)."""
    found: dict[str, frozenset[str]] = {}
    answers = [
        *(root / "bfcl" / "possible_answer").glob("*.json"),
        *(root / "acebench" / "data_en" / "possible_answer").glob("*.json"),
    ]
    for path in answers:
        for entry in _json_lines(path):
            found[str(entry["id"])] = frozenset(_called(entry.get("ground_truth")))
    for entry in _json_lines(root / "when2call" / "when2call_test_llm_judge.jsonl"):
        target = entry.get("target_tool")
        if isinstance(target, str) and target.startswith("{"):
            found[str(entry["uuid"])] = frozenset({str(json.loads(target).get("name"))})
    return found


def _called(truth: object) -> list[str]:
    """Function names of a gold answer: ``{name: args}`` or a list of such."""
    if isinstance(truth, dict):
        return [str(name) for name in truth]
    if isinstance(truth, list):
        return [name for item in truth for name in _called(item)]
    return []


def _json_lines(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)
