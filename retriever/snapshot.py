"""The in-process index on disk: its documents and vectors in one ``.npz``, so that a
restart serves the catalog before Qdrant is even imported.

Opening Qdrant's local mode reads every point of the collection, and importing
``qdrant_client`` alone took about 4.5 s of a profiled start at load 10; the catalog's
sync against the store (what changed since the last run) needs both. A snapshot of
the index the last sync produced lets a restart be ready first and sync after, in the
background.

Two ways to read one. When the snapshot's key (the store's version stamp and the
document variant it was written at) is the store's now, nothing changed since: every
row is served as it is, with the BM25 index and the no-tool gate's vectors the file
carries, and not one tool record of the store is read (over ToolBench's 46,661 tools,
reading the records took 8.9 s, the documents 1.4 s and BM25 7.6 s of a restart on a
busy machine). Otherwise only rows whose tool id and text digest match the documents
the store gives now are kept: a changed or new tool waits for the sync, a removed one
is gone, and BM25 is built again over what is kept. With ``retriever.expand_documents``
the tools' question rows travel with them (their vectors and owning rows; the key says
whether they are in), so a restart does not read them back from Qdrant either.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from dataclasses import astuple, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from retriever.config import RetrieverConfig
from retriever.documents import ToolDocument
from retriever.embedder import Vectors
from retriever.index import ExtraRows, ToolIndex
from retriever.lexical import BM25Index

log = logging.getLogger(__name__)

_BM25 = "bm25_"  # prefix of the BM25 index's arrays in the file


@dataclass(frozen=True, slots=True)
class GateVectors:
    """The no-tool gate's view of the catalog: its documents, embedded by ``encoder``,
    and the content words of each document and of its name (empty: not kept)."""

    encoder: str
    documents: list[str]
    vectors: Vectors
    words: list[frozenset[str]] = field(default_factory=list)
    names: list[frozenset[str]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Snapshot:
    key: str  # snapshot_key() when it was written; "" when unknown
    documents: list[ToolDocument]
    vectors: Vectors
    bm25: dict[str, npt.NDArray[Any]]  # BM25Index.state() of every row; empty: none
    gate: GateVectors | None
    extra: ExtraRows | None = None  # the question rows (retriever.expand_documents)


def snapshot_path(data_dir: Path, catalog: str, model: str) -> Path:
    """The snapshot of ``catalog``'s index as embedded by ``model``."""
    slug = re.sub(r"[^a-z0-9]+", "-", f"{catalog}-{model}".lower()).strip("-")
    return data_dir / "index-snapshots" / f"{slug[:200]}.npz"


def snapshot_key(store_version: str, config: RetrieverConfig) -> str:
    """What must be the same for every row to be served as written: the store's tools
    (its version stamp changes with every write) and how a tool becomes a document."""
    key = f"{store_version}|{config.document}"
    return key + "|questions" if config.expand_documents else key


def save_snapshot(
    path: Path, index: ToolIndex, *, key: str = "", gate: GateVectors | None = None
) -> None:
    """Write ``index``'s documents, vectors and BM25 index (and the gate's vectors) to
    ``path``, replaced in one rename, so a reader sees the old file or the new one."""
    arrays: dict[str, Any] = {  # Any: numpy's stub reads savez's keywords as its options
        "vectors": index.dense.matrix,
        # "rows", not the "documents" of objects earlier versions wrote: one of those
        # meets no key it knows, and syncs instead of failing on a list.
        "rows": _json_bytes([astuple(doc) for doc in index.documents]),
        "key": _json_bytes(key),
    }
    if index.extra is not None:
        arrays["extra_vectors"] = index.extra.vectors
        arrays["extra_owners"] = index.extra.owners
    if index.bm25 is not None:
        arrays.update({_BM25 + name: array for name, array in index.bm25.state().items()})
    if gate is not None:
        arrays["gate_encoder"] = _json_bytes(gate.encoder)
        arrays["gate_documents"] = _json_bytes(gate.documents)
        arrays["gate_vectors"] = gate.vectors
        arrays["gate_words"] = _json_bytes([sorted(words) for words in gate.words])
        arrays["gate_names"] = _json_bytes([sorted(words) for words in gate.names])
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.part.npz")
    np.savez(partial, **arrays)
    partial.replace(path)


def read_snapshot(path: Path) -> Snapshot | None:
    """The snapshot at ``path``; None when there is none or it cannot be read."""
    try:
        with np.load(path) as data:
            arrays = {name: data[name] for name in data.files}
        if "rows" in arrays:
            documents = [ToolDocument(*row) for row in orjson.loads(arrays["rows"].tobytes())]
        else:  # written before BM25 and the key were kept
            rows = orjson.loads(arrays["documents"].tobytes())
            documents = [ToolDocument(**row) for row in rows]
        key = orjson.loads(arrays["key"].tobytes()) if "key" in arrays else ""
        gate = None
        if "gate_vectors" in arrays:
            gate = GateVectors(
                orjson.loads(arrays["gate_encoder"].tobytes()),
                orjson.loads(arrays["gate_documents"].tobytes()),
                arrays["gate_vectors"],
                _word_sets(arrays.get("gate_words")),
                _word_sets(arrays.get("gate_names")),
            )
        extra = None
        if "extra_vectors" in arrays:
            extra = ExtraRows(arrays["extra_vectors"], arrays["extra_owners"].astype(np.intp))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:  # torn or foreign: sync instead
        log.warning("the index snapshot %s is unreadable: %s", path, exc)
        return None
    if len(arrays["vectors"]) != len(documents):
        log.warning("the index snapshot %s does not hold a vector per document", path)
        return None
    if extra is not None and (
        len(extra.vectors) != len(extra.owners)
        or (len(extra.owners) and int(extra.owners.max()) >= len(documents))
    ):
        log.warning("the index snapshot %s has question rows of no document", path)
        return None
    bm25 = {name[len(_BM25) :]: a for name, a in arrays.items() if name.startswith(_BM25)}
    return Snapshot(key, documents, arrays["vectors"], bm25, gate, extra)


def whole_index(snapshot: Snapshot, config: RetrieverConfig) -> ToolIndex:
    """Every row of ``snapshot``, its BM25 index read rather than built when it has one."""
    return ToolIndex.from_config(
        snapshot.documents,
        snapshot.vectors,
        config,
        bm25=_bm25(snapshot) if config.fusion else None,
        extra=snapshot.extra if config.expand_documents else None,
    )


def _bm25(snapshot: Snapshot) -> BM25Index | None:
    """The snapshot's BM25 index; None when it has none (built from the texts then)."""
    if not snapshot.bm25:
        return None
    try:
        index = BM25Index.from_state(snapshot.bm25)
    except (KeyError, ValueError) as exc:
        log.warning("the index snapshot's BM25 index is unreadable: %s", exc)
        return None
    return index if len(index) == len(snapshot.documents) else None


def load_snapshot(
    snapshot: Snapshot, documents: Sequence[ToolDocument], config: RetrieverConfig
) -> ToolIndex | None:
    """The index of those of ``documents`` that ``snapshot`` holds unchanged, in their
    order; None with none of them in it."""
    rows = {(doc.id, doc.digest): i for i, doc in enumerate(snapshot.documents)}
    found = [(doc, rows.get((doc.id, doc.digest))) for doc in documents]
    taken = [(doc, row) for doc, row in found if row is not None]
    if not taken:
        return None
    order = [row for _, row in taken]
    bm25 = None
    if config.fusion and snapshot.bm25 and order == list(range(len(snapshot.documents))):
        bm25 = _bm25(snapshot)  # every row, in order: the BM25 index holds as written
    extra = _extra_of(snapshot, order) if config.expand_documents else None
    return ToolIndex.from_config(
        [doc for doc, _ in taken], snapshot.vectors[order], config, bm25=bm25, extra=extra
    )


def _extra_of(snapshot: Snapshot, order: list[int]) -> ExtraRows | None:
    """The snapshot's question rows of the rows in ``order``, owned by their new rows."""
    if snapshot.extra is None:
        return None
    moved = np.full(len(snapshot.documents), -1, dtype=np.intp)
    moved[order] = np.arange(len(order))
    owners = moved[snapshot.extra.owners]
    kept = owners >= 0
    return ExtraRows(snapshot.extra.vectors[kept], owners[kept])


def _word_sets(array: npt.NDArray[np.uint8] | None) -> list[frozenset[str]]:
    return [] if array is None else [frozenset(row) for row in orjson.loads(array.tobytes())]


def _json_bytes(value: object) -> npt.NDArray[np.uint8]:
    return np.frombuffer(orjson.dumps(value), dtype=np.uint8)
