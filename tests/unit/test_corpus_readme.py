"""tests/corpus/README.md's scenario table is what ``scenarios.py`` holds (the table the bench
and the tests read) and what each script's docstring says: made by make_readme.py, never
edited by hand."""

from __future__ import annotations

import importlib.util
import sys

from tests_support import REPO


def make_readme():
    spec = importlib.util.spec_from_file_location(
        "make_readme", REPO / "tests/corpus/make_readme.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_corpus_readme_shows_every_scenario_as_the_table_holds_it():
    m = make_readme()
    readme = m.README.read_text()
    assert m.made(readme) == readme, "tests/corpus/README.md is stale: run make_readme.py"
    for s in m.SCENARIOS:
        assert f"| {s.name} | `{' '.join(s.argv)}` |" in readme


def test_a_scenario_re_judged_in_the_table_makes_a_different_readme():
    m = make_readme()
    s = m.SCENARIOS[0]
    before = m.right(s)
    changed = type(s)(s.name, s.argv, s.launcher, frozenset({"comms"}), "re-judged")
    assert m.right(changed) != before and "comms" in m.right(changed)
