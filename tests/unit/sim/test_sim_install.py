"""The simulated board sits below pynvml by replacing names pynvml does not promise to keep: a
release that moves them must fail with one line saying what to install, not with a traceback."""

from __future__ import annotations

import re
from pathlib import Path

import pynvml
import pytest

from gputop.sim import SimBoard
from gputop.sim.install import (
    PRIVATE_NAMES,
    TESTED_PYNVML,
    PynvmlChanged,
    install,
    private_names_problem,
)

REPO = Path(__file__).resolve().parents[3]


def test_this_pynvml_has_every_name_the_board_replaces():
    assert private_names_problem() is None, private_names_problem()


@pytest.mark.parametrize("name", sorted(PRIVATE_NAMES))
def test_a_pynvml_without_one_of_them_is_refused_in_one_line(monkeypatch, name):
    monkeypatch.delattr(pynvml, name)
    with pytest.raises(PynvmlChanged) as e:
        install(SimBoard("t4"))
    (line,) = str(e.value).splitlines()
    assert name in line and f"nvidia-ml-py{TESTED_PYNVML}" in line


def test_a_name_of_another_kind_is_refused_too(monkeypatch):
    monkeypatch.setattr(pynvml, "_nvmlGetFunctionPointer_cache", None)
    assert "_nvmlGetFunctionPointer_cache" in private_names_problem()


def test_pyproject_allows_the_versions_the_board_is_tested_with_and_no_others():
    deps = re.findall(r'"nvidia-ml-py([^"]*)"', (REPO / "pyproject.toml").read_text())
    assert deps == [TESTED_PYNVML]
