"""The README's `gputop diagnose` examples are what the code prints: each document kept in
docs/examples/ (from a real run: docs/examples/make_diagnose.py) is rendered as `gputop
diagnose` renders it, and its verdict block (from "verdict:" to its last lever) is in the
README, line for line, as an indented block."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gputop.headless import render

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "docs" / "examples").glob("diagnose-*.json"))


def verdict_block(text: str) -> list[str]:
    """The verdict's lines: from "verdict:" to the last line before the risks, what else
    holds and the inputs."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("verdict:"))
    end = next(i for i, ln in enumerate(lines) if i > start and not ln.startswith("  "))
    return lines[start:end]


def test_there_are_examples_to_check():
    assert len(EXAMPLES) >= 3, EXAMPLES


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_the_readme_shows_what_the_code_prints(path):
    block = verdict_block(render(json.loads(path.read_text()), timeline=False))
    readme = (REPO / "README.md").read_text()
    shown = "\n".join(f"    {line}".rstrip() for line in block)
    assert shown in readme, f"README.md should show, as {path.name} renders:\n{shown}"


def test_ci_runs_the_test_command_the_readme_gives():
    """README's "then the test command:" block is a line of .ci/run, as it is written."""
    lines = (REPO / "README.md").read_text().splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.endswith("then the test command:"))
    command = lines[at + 2].strip()
    assert command.startswith("pytest"), command
    assert command in (REPO / ".ci" / "run").read_text().splitlines(), command
