"""Every Markdown file the code and the developer docs cite is in the repository, with the
section they name: a citation that resolves only on one machine (``domain.md``, ``research/``,
once) sends a reader nowhere. A citation is a path ending in ``.md``, read from the repository's
root (in Markdown also from the file's folder, as a link is), optionally followed by
``, "Heading"`` or ``section N``."""

from __future__ import annotations

import re
from pathlib import Path

from tests_support import REPO

SCANNED = (
    "gputop/**/*.py",
    "gputop/**/*.json",
    "tests/**/*.py",
    "tests/data/*.json",
    "tests/**/*.md",
    "docs/**/*.md",
    "ARCHITECTURE.md",
    "README.md",
)
CITATION = re.compile(
    r"(?<![\w./-])(?P<path>(?:[\w.-]+/)*[\w-][\w.-]*\.md)\b"
    r'`?(?:,\s*\\?"(?P<section>[^"\\]+)\\?"|\s+section\s+(?P<number>\d+))?'
)
"""A path ending in .md (in backticks or not), then a heading in quotes (escaped in JSON) or a
section number."""
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$", re.M)


def _scanned() -> list[Path]:
    files = {p for pattern in SCANNED for p in REPO.glob(pattern)}
    files.discard(Path(__file__).resolve())
    return sorted(p for p in files if ".venv" not in p.parts)


def _headings(path: Path) -> list[str]:
    return [" ".join(h.split()).casefold() for h in HEADING.findall(path.read_text("utf-8"))]


def _is_value(text: str, m: re.Match[str]) -> bool:
    """A whole string literal (``"diagnose.md"``): a file name the code uses, not a citation."""
    before = text[m.start() - 1] if m.start() else ""
    after = text[m.end("path")] if m.end("path") < len(text) else ""
    return before in "\"'" and before != "" and after == before


def _resolve(where: str, cited: str) -> Path | None:
    """The cited file: from the repository's root, or in Markdown (a link) from the citing file's
    folder too."""
    bases = [REPO] + ([(REPO / where).parent] if where.endswith(".md") else [])
    for path in ((b / cited).resolve() for b in bases):
        if path.is_file() and path.is_relative_to(REPO):  # ../shared is not the repository
            return path
    return None


def problems(where: str, text: str) -> list[str]:
    """What does not resolve in ``text`` (the file ``where``), one line each."""
    out: list[str] = []
    for m in CITATION.finditer(text):
        if _is_value(text, m):
            continue
        line = text.count("\n", 0, m.start()) + 1
        cited = _resolve(where, m["path"])
        if cited is None:
            out.append(f"{where}:{line}: {m['path']} is not in the repository")
            continue
        heads = _headings(cited)
        if m["section"]:
            name = " ".join(re.sub(r"\n\s*#", " ", m["section"]).split())
            if name.casefold() not in heads:
                out.append(f'{where}:{line}: {m["path"]} has no section "{name}"')
        elif m["number"] and not any(re.match(rf"{m['number']}[.\s]", h) for h in heads):
            out.append(f"{where}:{line}: {m['path']} has no section {m['number']}")
    return list(dict.fromkeys(out))  # a Markdown link names its file twice


def test_every_cited_markdown_file_and_section_is_in_the_repository():
    found = [
        p for path in _scanned() for p in problems(str(path.relative_to(REPO)), path.read_text())
    ]
    assert not found, "citations that do not resolve:\n" + "\n".join(found)


def test_the_check_sees_a_missing_file_a_missing_section_and_skips_a_value():
    text = (
        '"""Facts (domain.md: > 80%); (docs/facts/capture.md, "no such\n    heading");\n'
        '(docs/facts/capture.md, "py-spy\'s cost"); docs/facts/bounds.md section 9;\n'
        '`docs/facts/bounds.md`, "nope";\n'
        '{"_about": "docs/facts/capture.md, \\"Torch frame names\\""}\n'
        '../shared/domain.md."""\n'
        'NAME = "diagnose.md"\n'
    )
    assert problems("probe.py", text) == [
        "probe.py:1: domain.md is not in the repository",
        'probe.py:1: docs/facts/capture.md has no section "no such heading"',
        "probe.py:3: docs/facts/bounds.md has no section 9",
        'probe.py:4: docs/facts/bounds.md has no section "nope"',
        "probe.py:6: ../shared/domain.md is not in the repository",
    ]
