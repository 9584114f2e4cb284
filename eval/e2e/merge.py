"""One table and plot from several end-to-end runs (the parts of one measurement).

    python -m eval.e2e.merge LABEL eval/results/e2e_A.json eval/results/e2e_B.json …

A measurement too long for one sitting runs as parts (``--arms``/``--sizes``/``--tasks``
of ``python -m eval.e2e``); this concatenates their rows in the order given, prints
the table with each part's command, code version and load averages, and draws
``eval/results/e2e_<LABEL>.png``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from eval.e2e.report import markdown, plot, summarise

RESULTS = Path(__file__).resolve().parents[2] / "eval" / "results"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
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
    summary = summarise(rows)
    print(markdown(summary))
    plot(summary, RESULTS / f"e2e_{label}.png", f"{model}, code {', '.join(dict.fromkeys(codes))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
