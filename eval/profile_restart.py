"""Where a restart's time goes before orchestrate is ready, on a data folder that holds
a catalog already indexed and served (its index snapshot written).

    python -m eval.profile_restart DATA_DIR [--top 25]

In one fresh process, as ``toolgraph serve``'s background load does: the settings, the
embedding model (:meth:`SelectService.encoder`), then the catalog from the index
snapshot (``CatalogService._load_snapshot``, the step after which ``/readyz`` says
ready) under cProfile. Prints the wall time of each, the cumulative time of the steps
named below (those that take time over a large catalog), the top functions by
cumulative time, and the load average before and after (the machine is shared).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import sys
import time
from pathlib import Path

#: (file suffix, function) of the steps worth naming, and what each is.
STEPS = (
    ("graph_store/store.py", "open_store", "open the graph store (its file's header)"),
    ("graph_store/memory.py", "list_tools", "read every tool record"),
    ("retriever/documents.py", "catalog_documents", "make every tool's document"),
    ("retriever/snapshot.py", "read_snapshot", "read the snapshot file"),
    ("retriever/lexical.py", "__init__", "build BM25 (tokenize the catalog)"),
    ("retriever/lexical.py", "from_state", "BM25 from the snapshot"),
    ("retriever/dense.py", "__init__", "dense matrix and its int8 copy"),
    ("proxy/orchestrate/catalog.py", "_gate", "the no-tool gate (model, vectors, words)"),
    ("retriever/gate/features.py", "of", "the gate's content words of every tool"),
    ("proxy/orchestrate/catalog.py", "_catalog_of", "gate, planner and finder of a tool list"),
    ("proxy/orchestrate/catalog.py", "_assemble", "planner and finder"),
)


async def _restart(data_dir: Path, profile: cProfile.Profile) -> tuple[float, float, int]:
    from proxy.config import load_settings
    from proxy.orchestrate.catalog import CatalogService
    from proxy.select.service import SelectService

    settings = load_settings(data_dir=data_dir)
    select = SelectService(settings.retriever)
    began = time.perf_counter()
    encoder = await select.encoder()
    model_s = time.perf_counter() - began
    catalog = CatalogService(settings, select)
    began = time.perf_counter()
    profile.enable()
    found = catalog._load_snapshot(encoder)  # the step readiness waits for
    profile.disable()
    snapshot_s = time.perf_counter() - began
    catalog.close()
    select.close()
    return model_s, snapshot_s, 0 if found is None else len(found[0].tools)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    began = time.perf_counter()
    import proxy.app  # noqa: F401  (what `toolgraph serve` imports before the port opens)

    import_s = time.perf_counter() - began
    profile = cProfile.Profile()
    model_s, snapshot_s, tools = asyncio.run(_restart(args.data_dir.resolve(), profile))
    stats = pstats.Stats(profile)
    print(f"import proxy.app: {import_s:.2f} s (before the port opens)")
    print(f"embedding model loaded: {model_s:.2f} s")
    print(f"catalog from the snapshot: {snapshot_s:.2f} s, {tools} tools served")
    print("\n| step | cumulative s | calls |\n|---|---:|---:|")
    entries = stats.stats  # type: ignore[attr-defined]
    for suffix, function, label in STEPS:
        rows = [v for (f, _, name), v in entries.items() if f.endswith(suffix) and name == function]
        if rows:
            calls = sum(row[1] for row in rows)
            print(f"| {label} (`{function}`) | {sum(row[3] for row in rows):.2f} | {calls} |")
    print()
    stats.sort_stats("cumulative").print_stats(args.top)
    load_after = os.getloadavg()
    print(
        f"{os.cpu_count()} CPUs; load average (1, 5, 15 min) before "
        f"{', '.join(f'{x:.2f}' for x in load_before)}, after "
        f"{', '.join(f'{x:.2f}' for x in load_after)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
