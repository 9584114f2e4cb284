"""One table and plot from several end-to-end runs (the parts of one measurement).

    python -m eval.e2e.merge [--rescore] LABEL eval/results/e2e_A.json eval/results/e2e_B.json …

A measurement too long for one sitting runs as parts (``--arms``/``--sizes``/``--tasks``
of ``python -m eval.e2e``); this concatenates their rows in the order given, prints
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
    label, paths = args[0], [Path(p) for p in args[1:]]
    rows: list[dict[str, Any]] = []
    codes, model = [], ""
    for path in paths:
        report = json.loads(path.read_text())
        rows += report["rows"]
        codes.append(str(report.get("code")))
        model = str(report.get("model", model))
        print(
            f"{path.name}: {report['command']} (code {report.get('code')}, "
            f"{len(report['rows'])} rows, started {report.get('started')}, load before "
            f"{report.get('load_before')}, after {report.get('load_after', 'cut: not recorded')})"
        )
    if rescore:
        print(f"rescored: {_rescore(rows)} verdicts changed")
    summary = summarise(rows)
    print(markdown(summary))
    plot(summary, RESULTS / f"e2e_{label}.png", f"{model}, code {', '.join(dict.fromkeys(codes))}")
    return 0


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
