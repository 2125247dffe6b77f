"""The README and docs/ pages as tests read them: fenced code blocks with the marker comment above each, headings, links."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]

_FENCE = re.compile(r"^(\s*)```(\w*)\s*$")
_MARKER = re.compile(r"^\s*<!--\s*(.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str  # dedented by the fence's own indent
    marker: str  # the HTML comment on the line above the fence, '' when none

    @property
    def where(self) -> str:
        """``page:line``, relative to the repository."""
        return f"{self.page.relative_to(REPO)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page``, in order."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, lang = opening.groups()
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
        body = textwrap.dedent("\n".join(line[len(indent):] if line.startswith(indent) else line
                                         for line in lines[i + 1:end])) + "\n"
        above = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = _MARKER.match(above)
        found.append(Block(page, i + 1, lang, body, marker.group(1) if marker else ""))
        i = end + 1
    return found


def all_blocks() -> list[Block]:
    """Every fenced block of every page."""
    return [block for page in PAGES for block in blocks(page)]


def marked(page: Path, words: str) -> list[Block]:
    """The blocks of ``page`` whose marker contains ``words``."""
    return [block for block in blocks(page) if words in block.marker]


def section(page: Path, heading: str) -> str:
    """The text under the heading line ``heading`` (e.g. ``'## lens report'``) up to the next heading of
    the same or a higher level."""
    text = page.read_text(encoding="utf-8")
    level = len(heading) - len(heading.lstrip("#"))
    match = re.search(rf"^{re.escape(heading)}\s*$", text, flags=re.M)
    assert match, f"{page.relative_to(REPO)} has no heading {heading!r}"
    rest = text[match.end():]
    following = re.search(rf"^#{{1,{level}}} ", rest, flags=re.M)
    return rest[:following.start()] if following else rest


def table_first_cells(text: str) -> list[str]:
    """The first cell of every body row of every table in ``text`` (header and separator rows left out)."""
    lines = text.splitlines()
    cells = []
    for i, line in enumerate(lines):
        header = i + 1 < len(lines) and lines[i + 1].startswith("| ---")
        if line.startswith("| ") and not line.startswith("| ---") and not header:
            cells.append(line.split(" | ")[0][2:].strip())
    return cells


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of ``page``'s headings (outside code blocks)."""
    found, fenced = set(), False
    for line in page.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line) or line.strip() == "```":
            fenced = not fenced
            continue
        if not fenced and line.startswith("#"):
            found.add(slug(line.lstrip("#")))
    return found
