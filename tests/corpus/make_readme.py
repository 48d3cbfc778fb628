"""Make the scenario table of tests/corpus/README.md from ``scenarios.py`` (the table the bench
and the tests read) and each script's own docstring, so the README says what the code runs:
a scenario added, renamed or re-judged there shows here by running this, and
tests/unit/test_corpus_readme.py fails while the two differ.

    python tests/corpus/make_readme.py           # rewrite the table in README.md
    python tests/corpus/make_readme.py --check   # exit 1, saying so, when it differs
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scenarios import CORPUS, SCENARIOS, Scenario

README = CORPUS / "README.md"
BEGIN = "<!-- made by tests/corpus/make_readme.py from scenarios.py: do not edit by hand -->"
END = "<!-- end of the made table -->"
HEAD = (
    "| scenario | script and flags | launcher | what the script does (its docstring) | "
    "right (and why) |\n|---|---|---|---|---|"
)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def what_it_does(script: str) -> str:
    """The first sentence of the script's docstring."""
    doc = ast.get_docstring(ast.parse((CORPUS / script).read_text())) or ""
    text = " ".join(doc.split("\n\n", 1)[0].split())
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def right(s: Scenario) -> str:
    """The bounds that are right for it, with what else it is judged on, then why."""
    out = " or ".join(sorted(s.expected))
    if s.onset:
        out += f" (onset {s.onset:g} s)"
    if s.never:
        out += f", never {' or '.join(sorted(s.never))}"
    if s.cause:
        of = f" of {s.cause_of}" if s.cause_of else ""
        out += f"; cause{of} holds “{s.cause}”"
    if s.risk:
        out += f"; a risk line holds “{s.risk}”"
    if s.foreign:
        out += f"; no lever names {', '.join(s.foreign)}"
    if s.shares:
        out += "; built as " + ", ".join(f"{name} {share:.0%}" for name, share in s.shares)
    if s.memory_mib:
        out += f"; in a {s.memory_mib} MiB memory cgroup"
    return out + (f". {s.why[0].upper()}{s.why[1:]}" if s.why else "")


def table() -> str:
    rows = [
        f"| {s.name} | `{' '.join(s.argv)}` | {s.launcher} | {_cell(what_it_does(s.argv[0]))} "
        f"| {_cell(right(s))} |"
        for s in SCENARIOS
    ]
    return "\n".join((BEGIN, HEAD, *rows, END))


def made(readme: str) -> str:
    """``readme`` with its table made afresh (between BEGIN and END)."""
    start, end = readme.find(BEGIN), readme.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"{README}: no {BEGIN!r} ... {END!r} to make the table between")
    return readme[:start] + table() + readme[end + len(END) :]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="only say whether it is up to date")
    args = p.parse_args()
    now = README.read_text()
    want = made(now)
    if args.check:
        if want != now:
            raise SystemExit(f"{README} differs from scenarios.py: run {Path(__file__).name}")
        return
    README.write_text(want)


if __name__ == "__main__":
    main()
