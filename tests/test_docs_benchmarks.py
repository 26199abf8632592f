"""docs/BENCHMARKS.md holds the current numbers, copied from the lab notebook docs/benchmarks/history.md.

Checks (issue 29, item 8): the page stays short; its tables and command blocks are verbatim lines of the
history (a number is copied, never retyped); every number elsewhere on the page occurs in the history; every
link into the history and every section title that code or docs quote next to either file resolves.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CURRENT = ROOT / "docs" / "BENCHMARKS.md"
HISTORY = ROOT / "docs" / "benchmarks" / "history.md"

pytestmark = pytest.mark.skipif(not CURRENT.exists(), reason="docs are not next to the tests")

NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
HISTORY_LINK = re.compile(r"\]\((?:\.\./)*(?:docs/)?(?:benchmarks/)?history\.md#([^)\s]+)\)")


def _fenced(text: str) -> list[bool]:
    """For each line, whether it is inside a code fence (the fence lines themselves count as inside)."""
    inside, out = False, []
    for line in text.split("\n"):
        if re.match(r"^\s*```", line):
            out.append(True)
            inside = not inside
        else:
            out.append(inside)
    assert not inside, "a code fence is left open"
    return out


def _headings(text: str) -> dict[str, str]:
    """Heading title -> its anchor, as GitHub makes it (lowercase, punctuation dropped, spaces to hyphens)."""
    out: dict[str, str] = {}
    seen: dict[str, int] = {}
    for line, fenced in zip(text.split("\n"), _fenced(text)):
        m = None if fenced else re.match(r"^#{1,6} (.*)$", line)
        if m:
            title = m.group(1).strip()
            slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.setdefault(title, slug if n == 0 else f"{slug}-{n}")
    return out


def test_current_page_is_short_and_fences_balance() -> None:
    text = CURRENT.read_text()
    assert len(text.splitlines()) <= 500
    _fenced(text)
    _fenced(HISTORY.read_text())


def test_tables_and_commands_are_verbatim_history_lines() -> None:
    history = HISTORY.read_text()
    history_lines = set(history.split("\n"))
    text = CURRENT.read_text()
    retyped = []
    for line, fenced in zip(text.split("\n"), _fenced(text)):
        if not NUMBER.search(line) or HISTORY_LINK.search(line) or "](#" in line:
            continue
        if (fenced or line.startswith("|")) and line not in history_lines:
            retyped.append(line)
    assert not retyped, f"table or command lines not copied from the history: {retyped[:3]}"


def test_every_number_on_the_page_is_in_the_history() -> None:
    history = HISTORY.read_text()
    text = HISTORY_LINK.sub("]", CURRENT.read_text())
    text = re.sub(r"\]\(#[^)]*\)", "]", text)
    missing = sorted({n for n in NUMBER.findall(text) if n not in history})
    assert not missing, f"numbers in docs/BENCHMARKS.md that the history does not hold: {missing}"


def test_links_into_the_history_resolve() -> None:
    anchors = set(_headings(HISTORY.read_text()).values())
    current_anchors = set(_headings(CURRENT.read_text()).values())
    docs = [*ROOT.glob("*.md"), *(ROOT / "docs").rglob("*.md")]
    broken = []
    for path in docs:
        text = path.read_text()
        for anchor in HISTORY_LINK.findall(text):
            if anchor not in anchors:
                broken.append(f"{path.name}: #{anchor}")
        if path == CURRENT:
            broken += [f"BENCHMARKS.md: #{a}" for a in re.findall(r"\]\(#([^)]+)\)", text) if a not in current_anchors]
        if path == HISTORY:
            broken += [f"history.md: #{a}" for a in re.findall(r"\]\(#([^)]+)\)", text) if a not in anchors]
    assert not broken, broken
    # The contents list at the top of the history names every section and subsection below it.
    history = HISTORY.read_text()
    contents, notebook = history.split("\n# Benchmarks\n", 1)
    listed = set(re.findall(r"\]\(#([^)]+)\)", contents))
    sections = {t for t in _headings(notebook) if re.search(rf"^#{{2,3}} {re.escape(t)}$", notebook, flags=re.M)}
    headings = _headings(history)
    assert sections and all(headings[t] in listed for t in sections), sorted(
        t for t in sections if headings[t] not in listed
    )


def test_quoted_section_titles_resolve() -> None:
    """`docs/BENCHMARKS.md, "Title"` in code and docs names a section that exists (in the history or the page).

    A quote may be the start of a title or a phrase of it (`"warm start"`).
    """
    titles = [*_headings(HISTORY.read_text()), *_headings(CURRENT.read_text())]
    norm = [re.sub(r"\s+", " ", t) for t in titles]
    sources = [
        *ROOT.glob("*.md"),
        *(ROOT / "docs").rglob("*.md"),
        *(ROOT / "src").rglob("*.py"),
        *(ROOT / "tests").rglob("*.py"),
        *(ROOT / "benchmarks").glob("*.py"),
    ]
    quote = re.compile(r"(?:BENCHMARKS|history)\.md`?\]?(?:\([^)]*\))?,? \"([^\"]+)\"")
    unresolved, seen = [], 0
    for path in sources:
        if path in (CURRENT, HISTORY) or path == Path(__file__):
            continue
        text = re.sub(r"\s*\n\s*(?:#:?\s*)?", " ", path.read_text())
        for cited in quote.findall(text):
            seen += 1
            cited = cited.rstrip(" .…").removesuffix("...").strip()
            if not any(t.startswith(cited) or cited in t for t in norm):
                unresolved.append(f"{path.relative_to(ROOT)}: {cited!r}")
    assert seen >= 10, "the pattern no longer finds the quoted titles"
    assert not unresolved, unresolved
