"""Tool names as OpenAI accepts them, and ids that survive re-imports.

OpenAI's rule for a function name is ``^[a-zA-Z0-9_-]{1,64}$``. Names from the wild
(RapidAPI titles, Chinese tool names, OpenAPI paths) are folded into that alphabet; a
name that is still too long keeps its head and ends in a hash of the whole, so two long
names that share their first 55 characters stay apart.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

MAX_NAME = 64
_INVALID = re.compile(r"[^a-zA-Z0-9_-]+")
_HASH_CHARS = 8


def short_hash(text: str, length: int = _HASH_CHARS) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


def normalise_name(raw: str) -> str:
    """Fold ``raw`` into ``[a-zA-Z0-9_-]{1,64}``; the same input always gives the same name."""
    ascii_text = unicodedata.normalize("NFKD", raw).encode("ascii", "ignore").decode("ascii")
    name = _INVALID.sub("_", ascii_text).strip("_")
    name = re.sub(r"_{2,}", "_", name)
    if not name:
        return f"tool_{short_hash(raw)}"
    if len(name) > MAX_NAME or _is_lossy(raw):
        # Letters with no ASCII form (a Chinese title) were dropped: the hash keeps
        # "乐鱼_for_x" and "体育_for_x" apart.
        name = f"{name[: MAX_NAME - _HASH_CHARS - 1]}_{short_hash(raw)}"
    return name


def _is_lossy(raw: str) -> bool:
    return any(
        not unicodedata.normalize("NFKD", char).encode("ascii", "ignore")
        for char in raw
        if ord(char) > 127 and char.isalnum()
    )


def is_valid_name(name: str) -> bool:
    return 0 < len(name) <= MAX_NAME and _INVALID.search(name) is None


def tool_id(source: str, group: str, original_name: str) -> str:
    """A stable id: the same tool from the same source keeps it across re-imports."""
    return short_hash(f"{source}\x1f{group}\x1f{original_name}", 16)


def group_id(category: str, group: str) -> str:
    return short_hash(f"{category}\x1f{group}", 16)
