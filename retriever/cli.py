"""``toolgraph index build`` and ``toolgraph search``: the catalog's index from a shell.

:func:`add_commands` adds them to the ``toolgraph`` parser and :func:`run_command`
runs them with the loaded settings. The model and the index load inside the
commands, never at import, so ``toolgraph serve`` does not pay for them.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO, get_args

from graph_store.cli import command_parser
from retriever.config import DocumentVariant, RetrieverConfig
from retriever.errors import RetrieverError

COMMANDS = ("index", "search")


@dataclass(frozen=True, slots=True)
class IndexCommandSettings:
    """What the commands read of toolgraph's settings: the retriever's, and where the
    store, the vectors and the embeddings cache are."""

    retriever: RetrieverConfig
    data_dir: Path
    qdrant_url: str | None
    neo4j_uri: str | None
    #: Tools the catalog leaves out (an MCP server's that is not connected): not indexed.
    left_out: frozenset[str] = frozenset()


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    index = command_parser(commands, "index", "build the catalog's vector index")
    actions = index.add_subparsers(dest="action", required=True)
    build = command_parser(
        actions, "build", "embed the catalog's tools into Qdrant (changed ones only)"
    )
    build.add_argument("--document", choices=get_args(DocumentVariant), help="document variant")
    build.add_argument("--quiet", action="store_true", help="no progress bar")

    search = command_parser(commands, "search", "search the catalog's index")
    search.add_argument("query")
    search.add_argument("-k", type=int, default=10, help="how many tools (10)")
    search.add_argument("--category")
    search.add_argument("--group")
    search.add_argument("--method", choices=("hybrid", "dense", "bm25"), default="hybrid")
    search.set_defaults(action="search")


def run_command(
    args: argparse.Namespace, settings: IndexCommandSettings, out: TextIO | None = None
) -> int:
    out = out or sys.stdout
    try:
        if args.command == "index":
            return _build(args, settings, out)
        return _search(args, settings, out)
    except RetrieverError as exc:
        print(f"toolgraph: {exc}", file=sys.stderr)
        return 2


def _build(args: argparse.Namespace, settings: IndexCommandSettings, out: TextIO) -> int:
    from graph_store.store import open_store
    from retriever.catalog import build_index, open_catalog
    from retriever.embedder import load_encoder

    config = settings.retriever
    if args.document:
        config = config.model_copy(update={"document": args.document})
    store = open_store(settings.data_dir, settings.neo4j_uri)
    try:
        tools = [tool for tool in store.list_tools() if tool.name not in settings.left_out]
    finally:
        store.close()
    encoder = load_encoder(config)
    catalog = open_catalog(encoder, config, settings.data_dir, settings.qdrant_url)
    cache_dir = settings.data_dir / "embeddings"
    try:
        report = build_index(
            tools, encoder, catalog, config, cache_dir=cache_dir, progress=not args.quiet
        )
    finally:
        catalog.close()
    print(f"{catalog.collection}: {report.summary()}", file=out)
    return 0


def _search(args: argparse.Namespace, settings: IndexCommandSettings, out: TextIO) -> int:
    from retriever.catalog import load_index, open_catalog
    from retriever.clauses import query_rows
    from retriever.embedder import load_encoder

    config = settings.retriever
    encoder = load_encoder(config)
    catalog = open_catalog(encoder, config, settings.data_dir, settings.qdrant_url)
    try:
        index = load_index(catalog, config)
    finally:
        catalog.close()
    vector = None
    if args.method != "bm25":
        vector = (
            query_rows(encoder, args.query) if config.clauses else encoder.encode([args.query])[0]
        )
    wanted = args.k + len(settings.left_out)  # an index built earlier may still hold them
    hits = index.search(
        vector, args.query, wanted, method=args.method, category=args.category, group=args.group
    )
    hits = [hit for hit in hits if hit.name not in settings.left_out][: args.k]
    for rank, hit in enumerate(hits, 1):
        print(f"{rank:>3}  {hit.score:.4f}  {hit.name}  [{hit.category} / {hit.group}]", file=out)
    if not hits:
        print("no tools found", file=out)
    return 0
