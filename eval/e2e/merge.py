"""One table and plot from several end-to-end runs (the parts of one measurement).

    python -m eval.e2e.merge [--rescore] LABEL eval/results/e2e_A.json eval/results/e2e_B.json …

A measurement too long for one sitting runs as parts (``--arms``/``--sizes``/``--tasks``
of ``python -m eval.e2e``); this concatenates their rows in the order given (a part
written ``PATH:ARM[,ARM…]`` gives only those arms' rows, for a file that also holds an
arm another part measured again), prints
the table with each part's command, code version and load averages, and draws
``eval/results/e2e_<LABEL>.png``. ``--rescore`` judges every row's stored answer again
with today's checker (:func:`eval.e2e.tasks.is_correct`), for parts run before the
checker was made stricter; the number of verdicts that changed is printed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from eval.e2e.arms import ARMS
from eval.e2e.packs import PACK_TASKS
from eval.e2e.report import markdown, plot, summarise
from eval.e2e.tasks import TASKS, is_correct

RESULTS = Path(__file__).resolve().parents[2] / "eval" / "results"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    rescore = "--rescore" in args
    args = [arg for arg in args if arg != "--rescore"]
    if len(args) < 2:
        raise SystemExit(__doc__)
    label, parts = args[0], [read_part(spec) for spec in args[1:]]
    rows: list[dict[str, Any]] = []
    codes, model = [], ""
    for path, arms in parts:
        report = json.loads(path.read_text())
        taken = [row for row in report["rows"] if arms is None or row["arm"] in arms]
        rows += taken
        codes.append(str(report.get("code")))
        model = str(report.get("model", model))
        which = "" if arms is None else " of " + ", ".join(sorted(arms))
        print(
            f"{path.name}: {report['command']} (code {report.get('code')}, "
            f"{len(taken)} rows{which}, started {report.get('started')}, load before "
            f"{report.get('load_before')}, after {report.get('load_after', 'cut: not recorded')})"
        )
    if rescore:
        print(f"rescored: {_rescore(rows)} verdicts changed")
    summary = summarise(rows)
    print(markdown(summary))
    plot(summary, RESULTS / f"e2e_{label}.png", f"{model}, code {', '.join(dict.fromkeys(codes))}")
    return 0


def read_part(spec: str) -> tuple[Path, frozenset[str] | None]:
    """``PATH`` or ``PATH:ARM[,ARM…]``: a part's file and the arms taken from it (None:
    every arm); a suffix that names no arm is part of the path."""
    path, _, suffix = spec.rpartition(":")
    arms = frozenset(suffix.split(","))
    if path and arms <= set(ARMS):
        return Path(path), arms
    return Path(spec), None


def _rescore(rows: list[dict[str, Any]]) -> int:
    tasks = {task.id: task for task in (*TASKS, *PACK_TASKS)}
    changed = 0
    for row in rows:
        task = tasks.get(str(row["task"]))
        if task is None or row.get("error"):
            continue  # a BFCL task (its own checker) or a request that failed
        verdict = is_correct(task, str(row.get("answer", "")))
        changed += verdict != row["correct"]
        row["correct"] = verdict
    return changed


if __name__ == "__main__":
    raise SystemExit(main())
