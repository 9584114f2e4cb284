"""Where the evaluations find their data sets: one folder, set by ``EVAL_DATA``.

The training sets (``train/``), toolbench_stable, Seal-Tools (``extras/seal_tools``),
TaskBench and UltraTool sit in one folder; every script under ``eval/`` that reads one
of them takes its default path from here, and a path given on its command line wins.
Unset, the folder is ``shared/data`` beside the repository (``../shared/data`` seen from
its root), where the project's checkout keeps it.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Not ``TOOLGRAPH_…``: that prefix is the proxy's settings, where an unknown name is an error.
ENV = "EVAL_DATA"
BESIDE_REPOSITORY = Path(__file__).resolve().parents[2] / "shared" / "data"


def data_folder() -> Path:
    """``$EVAL_DATA``, else ``shared/data`` beside the repository."""
    value = os.environ.get(ENV, "").strip()
    return Path(value).expanduser() if value else BESIDE_REPOSITORY


def dataset(*parts: str) -> Path:
    """A path under the data folder: ``dataset("train")``, ``dataset("toolbench_stable")``."""
    return data_folder().joinpath(*parts)


#: Seal-Tools in the retrieval sets' layout, as ``python -m eval.seal_beir`` writes it.
SEAL_BEIR = Path(".cache/retriever/seal_beir")


def unseen_sets() -> list[Path]:
    """The retrieval sets no fine-tuning read: toolbench_stable and Seal-Tools."""
    return [dataset("toolbench_stable"), SEAL_BEIR]
