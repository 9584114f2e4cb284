"""Which part of a request each tool serves, and whether one tool's part comes first.

When several sub-tasks carry one text (the request given whole: TaskBench's labelled
samples have no step texts, and a plan falls back to that when no decomposition came),
similarity cannot tell those sub-tasks apart, and a dense graph cannot either:
DailyLife's joins every ordered pair of its 40 tools, so every order of a request's
tools is as likely by its edges. The request's wording still carries the order: people
name the steps in the order they want them ("deliver the gift, then book a flight,
after arriving see a doctor"). A tool's *position* in a text is the clause closest to
its document (dense cosine); a dependency A → B whose B sits in a later clause than A
is evidence for that order, an earlier clause evidence against it, the same clause
none.

The weight is a log-odds in nats, ``log(P(later) / P(earlier))`` over real call
transitions A → B, fitted by ``python -m eval.plan_trust`` on training call sequences
only (``order`` in ``edge_trust.json``). It is measured with this module's own clause
split and positions, so their errors are in the figure.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict

import numpy as np
import numpy.typing as npt

from retriever.encoder import Encoder
from retriever.index import ToolIndex

#: Clause boundaries: sentence ends, semicolons, commas and the words that join steps.
#: A comma also separates the parts of one argument ("New York, USA"): a fragment of
#: fewer than ``MIN_WORDS`` words joins the clause before it.
_JOINS = r"then|and|after|afterwards|before|once|next|finally|also"
_BOUNDARY = re.compile(rf"((?:[.!?;:,\n]+\s*|\s*\b(?:{_JOINS})\b,?\s*)+)", re.IGNORECASE)
MIN_WORDS = 3
#: Texts whose positions a ``TextOrder`` keeps (the sub-tasks of a few requests).
POSITIONS_KEPT = 32


def split_clauses(text: str) -> list[str]:
    """The text's clauses in order; a short fragment joins the clause before it.

    Not :func:`retriever.clauses.cut`, which search reads: this one cuts finer (every
    "and", comma, "after", "before"…, where search cuts at ", and" and its like only)
    and joins a short fragment to the clause before it where search drops it ("London,
    UK" stays whole), and the ``order`` weight of ``edge_trust.json`` was fitted on
    positions from this split; the other cutter would move those positions and the
    figure with them."""
    pieces = _BOUNDARY.split(text)  # text, boundary, text, ...
    clauses: list[str] = []
    for i in range(0, len(pieces), 2):
        piece = " ".join(pieces[i].split())
        if not piece:
            continue
        if clauses and len(piece.split()) < MIN_WORDS:
            clauses[-1] += pieces[i - 1].rstrip() + " " + piece
        else:
            clauses.append(piece)
    return clauses


class TextOrder:
    """Positions of a catalog's tools in texts, and the order evidence between two tools."""

    def __init__(self, encoder: Encoder, index: ToolIndex, nats: float) -> None:
        self.encoder = encoder
        self.nats = nats
        self._documents = index.dense.matrix
        self._row = {doc.id: i for i, doc in enumerate(index.documents)}
        self._positions: OrderedDict[str, npt.NDArray[np.intp] | None] = OrderedDict()
        self._lock = threading.Lock()

    def positions(self, text: str) -> npt.NDArray[np.intp] | None:
        """Each tool's clause in ``text`` (by catalog row); ``None`` for one clause."""
        with self._lock:
            if text in self._positions:
                self._positions.move_to_end(text)
                return self._positions[text]
        clauses = split_clauses(text)
        found = None
        if len(clauses) > 1:
            similarity = self._documents @ self.encoder.encode(clauses).T.astype(np.float32)
            found = np.argmax(similarity, axis=1).astype(np.intp)
        with self._lock:
            self._positions[text] = found
            while len(self._positions) > POSITIONS_KEPT:
                self._positions.popitem(last=False)
        return found

    def sign(self, text: str, before: str, after: str) -> int:
        """+1 when ``after``'s clause comes later than ``before``'s, -1 earlier, 0 the
        same (or an unknown tool, or a text of one clause); tool ids."""
        positions = self.positions(text)
        a, b = self._row.get(before), self._row.get(after)
        if positions is None or a is None or b is None:
            return 0
        return int(np.sign(int(positions[b]) - int(positions[a])))

    def evidence(self, text: str, before: str, after: str) -> float:
        """Nats for "``after`` follows ``before``" from their places in ``text``."""
        return self.nats * self.sign(text, before, after)
