"""Quantities written with an SI unit: ``"1 nC"`` → ``1e-9``, ``"2 mH"`` → ``0.002``.

The built-in tools take SI numbers. A request says "a 5 nC charge" and a small
argument writer copies ``"5 nC"`` (or ``5``) into the call; a string in a number's
place is read here, deterministically, with the prefix applied, instead of refused.
A plain number is taken as it is: it is already in SI units, or it is the writer's
mistake, which only the parameter's description can prevent.
"""

from __future__ import annotations

import re

PREFIXES = {
    "T": 1e12,
    "G": 1e9,
    "M": 1e6,
    "k": 1e3,
    "": 1.0,
    "c": 1e-2,
    "m": 1e-3,
    "u": 1e-6,
    "\u00b5": 1e-6,  # micro sign
    "\u03bc": 1e-6,  # Greek mu
    "n": 1e-9,
    "p": 1e-12,
    "f": 1e-15,
}
#: The units a built-in tool's numbers are in (a bare "m" is metres, never milli).
UNITS = ("C", "A", "V", "F", "H", "Ohm", "ohm", "\u03a9", "T", "s", "Hz", "W", "J", "N", "m")
_QUANTITY = re.compile(
    r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*"
    rf"({'|'.join(re.escape(p) for p in PREFIXES if p)})?"
    rf"({'|'.join(re.escape(u) for u in UNITS)})\s*$"
)


def quantity(text: str) -> float | None:
    """The SI value of ``text`` when it is a number and a (prefixed) SI unit, else None."""
    match = _QUANTITY.match(text)
    if match is None:
        return None
    number, prefix, unit = match.groups()
    if unit == "m" and prefix is None:
        return float(number)
    return float(number) * PREFIXES[prefix or ""]
