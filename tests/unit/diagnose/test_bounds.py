"""The bound registry is complete: every entry has its rule, levers, tier, style and
description, the JSON Schema and the docs name exactly its bounds, and each bound is the
asserted verdict of a scenario in the diagnose tests. The messages name the entry and what it
lacks (``tests/registry_check.py``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from registry_check import asserted_bounds, registry_problems, spelled_bounds

from gputop import schemas
from gputop.diagnose import bound_levers as levers
from gputop.diagnose import rules
from gputop.diagnose.bounds import (
    BY_NAME,
    NAMES,
    REGISTRY,
    RULES,
    Bound,
    Style,
    Tier,
    bound,
)
from gputop.ui.panes.verdict import LEVEL
from gputop.vocab import bounds as bound_names

REPO = Path(__file__).resolve().parents[3]


def schema_bounds() -> list[str]:
    schema = schemas.load("diagnose")
    return schema["$defs"]["finding"]["properties"]["bound"]["enum"]


def test_every_entry_is_complete_and_the_schema_enum_is_the_registry():
    problems = registry_problems(schema_bounds())
    assert not problems, "the bound registry (gputop/diagnose/bounds.py):\n" + "\n".join(problems)


def test_an_incomplete_entry_is_named_with_what_it_lacks():
    half = Bound("new-bound", rules.comms)
    problems = registry_problems(["new-bound"], (*REGISTRY, half))
    lines = [p for p in problems if "'new-bound'" in p]
    assert any("no levers" in p for p in lines), problems
    assert any("no style" in p for p in lines)
    assert any("no description" in p for p in lines)
    assert any("not in gputop/schemas/diagnose.schema.json" in p for p in problems)  # the 16 others
    assert any("sharing the rule comms must be adjacent" in p for p in problems)
    no_rule = registry_problems(None, (*REGISTRY, replace(half, rule=None)))
    assert any("'new-bound'" in p and "no rule" in p for p in no_rule), no_rule


def test_an_entry_missing_from_the_schema_or_a_stray_enum_value_is_said():
    enum = [n for n in schema_bounds() if n != "side-work"] + ["gone"]
    problems = registry_problems(enum)
    assert any("'side-work': not in gputop/schemas/diagnose.schema.json" in p for p in problems)
    assert any("enum has 'gone': no entry" in p for p in problems)


def test_a_rule_that_names_another_bound_is_said():
    wrong = replace(BY_NAME["comms"], name="kommunication")
    registry = tuple(wrong if b.name == "comms" else b for b in REGISTRY)
    assert any("names 'comms', no entry of its own" in p for p in registry_problems(None, registry))
    with pytest.raises(LookupError, match="'nope', which has no entry"):
        bound("nope")


def test_every_budget_slice_has_a_bound_and_a_bound_names_only_slices():
    # the verdict reads the registry for which rule speaks for the largest loss: a slice no
    # bound names would have no finding, a misspelled slice would never be the principal
    registry = tuple(replace(b, slices=()) if b.name == "comms" else b for b in REGISTRY)
    assert any(
        "slice 'comms': no bound names its loss" in p for p in registry_problems(None, registry)
    )
    typo = tuple(replace(b, slices=("comm",)) if b.name == "comms" else b for b in REGISTRY)
    assert any("'comms': names the slice 'comm'" in p for p in registry_problems(None, typo))


def test_the_rule_order_is_the_registry_order_each_rule_once():
    assert RULES[0] is rules.hung and RULES[-1] is rules.idle
    assert len(RULES) == len(set(RULES)) == 14  # the three data-input bounds share one rule
    shared = [b.name for b in REGISTRY if b.rule is rules.data_input]
    assert shared == ["data-input", "data-input/cpu-transform", "data-input/io"]
    assert BY_NAME["data-input/io"].levers is levers.data_io
    assert [b.name for b in REGISTRY if b.tier is Tier.OVERRIDE] == ["hung"]
    assert [b.name for b in REGISTRY if b.tier is Tier.FALLBACK] == ["gpu-compute", "idle"]


def test_the_pane_has_a_look_for_every_style():
    assert set(LEVEL) == set(Style)


@pytest.mark.parametrize("doc", ["docs/diagnose.md", "docs/prometheus.md"])
def test_the_docs_list_every_bound(doc):
    text = (REPO / doc).read_text()
    missing = [n for n in NAMES if f"`{n}`" not in text]
    assert not missing, f"{doc} does not list the bounds {missing} (gputop/diagnose/bounds.py)"


def test_every_bound_is_the_asserted_verdict_of_a_diagnose_scenario():
    asserted = asserted_bounds(REPO / "tests" / "unit" / "diagnose" / "test_diagnose.py")
    missing = [n for n in NAMES if n not in asserted]
    assert not missing, (
        f"no scenario in tests/unit/diagnose/test_diagnose.py asserts the bounds {missing} as its "
        "verdict "
        "(assert bound(v) == NAME)"
    )


def test_a_bound_only_mentioned_or_ruled_out_is_not_asserted(tmp_path):
    # a test that names a bound without requiring it would pass with its rule broken
    (tmp_path / "test_x.py").write_text(
        "import pytest\n"
        "def test_said():\n"
        "    assert bound(v) == 'hung' and v.since == 0\n"
        "    assert verdict().principal.bound == GPU_COMPUTE\n"
        "@pytest.mark.parametrize(('scenario', 'expected'), [('a', 'comms'), ('b', 'idle')])\n"
        "def test_each(scenario, expected):\n"
        "    assert bound(verdict(scenario)) == expected\n"
        "def test_not_said():\n"
        "    assert bound(v) != 'straggler'\n"
        "    assert bound(v) in ('side-work', 'gpu-compute')\n"
        "    assert any(f.bound == 'data-input' for f in v.secondary)\n"
        "    assert bound(v) == 'h2d-copy' or bound(v) == 'memory-bandwidth'\n"
        "    assert not bound(v) == 'data-input/io'\n"
        "    assert 'throttled-power' in text\n"
    )
    assert asserted_bounds(tmp_path / "test_x.py") == {"hung", "gpu-compute", "comms", "idle"}


def test_every_name_in_vocab_has_an_entry_and_every_entry_a_name():
    assert [b.name for b in REGISTRY] == list(bound_names.NAMES)
    extra = Bound("new-bound", rules.comms)
    assert any(
        "'new-bound': not named in gputop/vocab/bounds.py" in p
        for p in registry_problems(None, (*REGISTRY, extra))
    )
    fewer = tuple(b for b in REGISTRY if b.name != bound_names.H2D_COPY)
    assert any(
        "gputop/vocab/bounds.py names 'h2d-copy', which has no entry" in p
        for p in registry_problems(None, fewer)
    )


def test_a_bound_spelled_as_a_string_in_a_rule_is_said_with_its_line(tmp_path):
    # a band whose bound is misspelled never holds: the hysteresis is silently off
    (tmp_path / "gpu.py").write_text(
        "def gpu_compute(sig):\n"
        "    need = band(COMPUTE_SM, sig, GPU_COMPUTE, 'gpu-compte')\n"
        "    held = sig.holding == 'comms'\n"
        "    return finding('gpu-compute', [], [], [], 'fine', impact=band(1, sig, 'x'))\n"
        "    return finding(GPU_COMPUTE, [], [], [], 'a summary, not a name')\n"
    )
    assert spelled_bounds(tmp_path) == [
        ("gputop/diagnose/rules/gpu.py:2", "gpu-compte"),
        ("gputop/diagnose/rules/gpu.py:3", "comms"),
        ("gputop/diagnose/rules/gpu.py:4", "gpu-compute"),
        ("gputop/diagnose/rules/gpu.py:4", "x"),
    ]
    assert spelled_bounds() == []  # the rules as they are: every name from gputop/vocab
