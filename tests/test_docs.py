"""The documentation holds together: every relative link in a ``*.md`` file reaches a file
that exists, every ``#anchor`` a heading of the page it names, and README.md stays short.

Links to other sites are not fetched (no network in the tests). Fenced code blocks and
inline code are skipped, since what they hold is text to type, not a link.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parent.parent
README_MAX_LINES = 300
# Folders that hold no documentation of this project: tools, caches, installed packages.
SKIPPED = {"node_modules", "__pycache__", "site-packages"}

_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.MULTILINE)
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$", re.MULTILINE)
_HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.IGNORECASE)


def markdown_files(root: Path) -> list[Path]:
    """Every ``*.md`` under ``root``, outside hidden folders and installed packages."""
    return sorted(
        path
        for path in root.rglob("*.md")
        if not any(part.startswith(".") or part in SKIPPED for part in path.relative_to(root).parts)
    )


def _prose(text: str) -> str:
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: markup dropped, lower case, punctuation out,
    spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    text = unicodedata.normalize("NFC", text).lower()
    kept = "".join(c for c in text if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a page: one per heading (repeats numbered ``-1``, ``-2`` as GitHub
    numbers them) and any ``<a name=…>`` / ``<a id=…>``."""
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    found: set[str] = set(_HTML_ANCHOR.findall(text))
    seen: dict[str, int] = {}
    for _, heading in _HEADING.findall(text):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> list[str]:
    text = _prose(path.read_text(encoding="utf-8"))
    return _LINK.findall(text) + _REFERENCE.findall(text)


def dead_links(path: Path, root: Path) -> list[str]:
    """What in ``path`` points at nothing: ``file: target (why)`` for each."""
    problems = []
    for target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # http:, mailto:, …
            continue
        file_part, _, anchor = target.partition("#")
        file_part = unquote(file_part)
        goal = path if not file_part else (path.parent / file_part).resolve()
        where = f"{path.relative_to(root)}: {target}"
        if file_part.startswith("/") or not goal.is_relative_to(root):
            problems.append(f"{where} (outside the repository)")
        elif not goal.exists():
            problems.append(f"{where} (no such file)")
        elif anchor and goal.suffix == ".md" and unquote(anchor) not in anchors(goal):
            problems.append(f"{where} (no heading with that anchor)")
    return problems


def test_every_relative_link_in_the_docs_reaches_a_file_and_an_anchor() -> None:
    files = markdown_files(ROOT)
    assert ROOT / "README.md" in files
    problems = [problem for path in files for problem in dead_links(path, ROOT)]
    assert problems == []


def test_the_readme_stays_within_its_bound() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines (at most {README_MAX_LINES}): move reference "
        "and figures to docs/"
    )


def test_the_checker_finds_a_missing_file_a_wrong_anchor_and_a_way_out(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "api.md").write_text("# The API\n\n## Errors `4xx`, in short\n")
    page = tmp_path / "README.md"
    page.write_text(
        "[fine](docs/api.md#errors-4xx-in-short) [top](#intro) ![img](docs/api.md)\n"
        "# Intro\n"
        "[gone](docs/missing.md) [wrong](docs/api.md#no-such-part) [up](../elsewhere.md)\n"
        "[web](https://example.com/x.md) `[code](not/a/link.md)`\n"
        "```\n[fenced](not/a/link.md)\n```\n"
        "[ref]: docs/gone-too.md\n"
    )
    assert dead_links(page, tmp_path) == [
        "README.md: docs/missing.md (no such file)",
        "README.md: docs/api.md#no-such-part (no heading with that anchor)",
        "README.md: ../elsewhere.md (outside the repository)",
        "README.md: docs/gone-too.md (no such file)",
    ]


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("`/v1/responses` beside chat, in the same run", "v1responses-beside-chat-in-the-same-run"),
        ("Load that must hold (`make bench-load`)", "load-that-must-hold-make-bench-load"),
        ("MCP servers as tool sources", "mcp-servers-as-tool-sources"),
        ("[The console](console.md) and traces", "the-console-and-traces"),
    ],
)
def test_anchors_are_the_ones_github_makes(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor


def test_a_repeated_heading_gets_a_numbered_anchor(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Setup\n## Setup\n```\n# Setup\n```\n")
    assert anchors(page) == {"setup", "setup-1"}
