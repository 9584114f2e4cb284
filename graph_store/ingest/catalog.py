"""Import files of any supported format into a store, with one report for the batch.

The format is given or recognised from the file: JSON-lines rows with ``_id`` are the
ToolBench corpus, with ``field`` Seal-Tools; a document with ``openapi`` is OpenAPI,
with ``api_list`` a RapidAPI tool, with ``nodes`` TaskBench, and a list of functions or
a ``tools`` array OpenAI function specs. A folder is walked for files of a known format.
Bad items are reported and skipped; everything else is stored in one transaction.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from graph_store.errors import InvalidItem
from graph_store.ingest._common import Parsed, read_json
from graph_store.ingest.openai_spec import parse_openai
from graph_store.ingest.openapi import parse_openapi
from graph_store.ingest.seal import parse_seal
from graph_store.ingest.taskbench import parse_taskbench
from graph_store.ingest.toolbench import parse_corpus, parse_rapidapi
from graph_store.models import Tool
from graph_store.store import GraphStore

FORMATS = ("openai", "openapi", "toolbench", "rapidapi", "taskbench", "seal")
_SUFFIXES = (".json", ".yaml", ".yml", ".jsonl", ".jsonl.gz", ".json.gz")
_DOCUMENT_PARSERS = {
    "openai": parse_openai,
    "openapi": parse_openapi,
    "rapidapi": parse_rapidapi,
    "taskbench": parse_taskbench,
}

#: Told (bytes read, bytes in all) as an import goes.
Progress = Callable[[int, int], None]


@dataclass
class ImportReport:
    files: int = 0
    created: int = 0
    updated: int = 0
    errors: list[InvalidItem] = field(default_factory=list)
    skipped: list[InvalidItem] = field(default_factory=list)

    @property
    def imported(self) -> int:
        return self.created + self.updated

    def summary(self) -> str:
        return (
            f"{self.imported} tools imported ({self.created} new, {self.updated} updated) "
            f"from {self.files - len(self.skipped)} files, {len(self.errors)} errors"
        )


def import_paths(
    store: GraphStore,
    paths: Iterable[Path],
    fmt: str | None = None,
    progress: Progress | None = None,
) -> ImportReport:
    """Parse every file under ``paths`` and store the good tools in one transaction."""
    files = list(_files(paths))
    report = ImportReport(files=len(files))
    parsed = Parsed()
    total, done = sum(_size(path) for path, _ in files), 0
    for path, explicit in files:
        within = None if progress is None else _within(progress, done, total)
        try:
            parsed.extend(parse_file(path, fmt, within))
        except InvalidItem as exc:
            # Found in a folder, a file that is no catalog at all is passed over.
            (report.errors if explicit else report.skipped).append(exc)
        done += _size(path)
        if progress is not None:
            progress(done, total)
    tools, clashes = unique_tools(parsed.tools, store.names())
    report.errors += parsed.errors + clashes
    known = set(store.names().values())
    store.upsert_tools(tools)
    report.created = sum(tool.id not in known for tool in tools)
    report.updated = len(tools) - report.created
    return report


def parse_file(
    path: Path, fmt: str | None = None, progress: Callable[[int], None] | None = None
) -> Parsed:
    """One file through its adapter; :class:`InvalidItem` when it cannot be read at all.

    ``progress`` hears the bytes read so far of the big (JSON-lines) formats.
    """
    fmt = fmt or _sniff_lines(path)
    if fmt == "toolbench":
        return parse_corpus(path, progress)
    if fmt == "seal":
        return parse_seal(path, progress)
    document = read_json(path)
    fmt = fmt or _sniff_document(document)
    if fmt is None or fmt not in _DOCUMENT_PARSERS:
        raise InvalidItem(str(path), "document", f"unknown format (one of {', '.join(FORMATS)})")
    return _DOCUMENT_PARSERS[fmt](path, document)


def unique_tools(tools: list[Tool], taken: dict[str, str]) -> tuple[list[Tool], list[InvalidItem]]:
    """Keep the last version of each id; refuse a tool whose name another id holds."""
    owner = dict(taken)
    kept: dict[str, Tool] = {}
    errors = []
    for tool in tools:
        holder = owner.get(tool.name)
        if holder is not None and holder != tool.id:
            other = kept.get(holder)
            what = f"{other.original_name!r} in {other.provenance.file}" if other else holder
            errors.append(
                InvalidItem(
                    tool.provenance.file,
                    tool.provenance.item,
                    f"name {tool.name!r} is already taken by {what}",
                )
            )
            continue
        owner[tool.name] = tool.id
        kept[tool.id] = tool
    return list(kept.values()), errors


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _within(progress: Progress, done: int, total: int) -> Callable[[int], None]:
    return lambda position: progress(done + position, total)


def _files(paths: Iterable[Path]) -> Iterator[tuple[Path, bool]]:
    for path in paths:
        if not path.is_dir():
            yield path, True
            continue
        for child in sorted(path.rglob("*")):
            if child.is_file() and child.name.endswith(_SUFFIXES) and not _shadowed(child):
                yield child, False


def _shadowed(path: Path) -> bool:
    # TaskBench's graph_desc.json repeats tool_desc.json's nodes.
    return path.name == "graph_desc.json" and (path.parent / "tool_desc.json").exists()


def _sniff_lines(path: Path) -> str | None:
    if not path.name.endswith((".jsonl", ".jsonl.gz")):
        return None
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as lines:
            first = next((line for line in lines if line.strip()), "{}")
        row = json.loads(first)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidItem(str(path), "line 1", f"not JSON lines: {exc}") from None
    if isinstance(row, dict) and "api_name" in row:
        return "toolbench" if "_id" in row else "seal" if "field" in row else None
    raise InvalidItem(str(path), "line 1", f"unknown format (one of {', '.join(FORMATS)})")


def _sniff_document(document: object) -> str | None:
    if isinstance(document, list):
        return "openai"
    if not isinstance(document, dict):
        return None
    for key, fmt in (("openapi", "openapi"), ("api_list", "rapidapi"), ("nodes", "taskbench")):
        if key in document:
            return fmt
    if "tools" in document or "functions" in document or "parameters" in document:
        return "openai"
    return None
