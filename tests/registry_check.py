"""The bound registry's completeness check, kept with the tests that run it: what an entry of
``gputop/diagnose/bounds.py`` lacks, read from the entries and the rules' own source. Parsing
source is the tests' business, not the monitor's: nothing here ships in ``gputop/``
(``tests/unit/test_bounds.py`` prints what it finds, one line a problem).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from pathlib import Path

from gputop.diagnose import rules
from gputop.diagnose.bounds import REGISTRY, Bound, Style, Tier
from gputop.diagnose.signals import RuleInputs
from gputop.vocab import bounds as bound_names
from gputop.vocab import budget as slices


def registry_problems(
    schema_bounds: Iterable[str] | None = None, registry: Sequence[Bound] = REGISTRY
) -> list[str]:
    """What the registry lacks, one line per problem naming the entry and the part; empty when
    every entry is complete. ``schema_bounds``: the bound enum of diagnose's JSON Schema
    (``gputop.schemas.load("diagnose")``), when the caller checks it."""
    registry = tuple(registry)
    out = _entry_problems(registry) + _rule_problems(registry) + _name_problems(registry)
    out += _slice_problems(registry)
    if schema_bounds is not None:
        out += _schema_problems(registry, list(schema_bounds))
    return out


def _entry_problems(registry: tuple[Bound, ...]) -> list[str]:
    """Each entry's own parts: a name once, a rule, levers, a tier, a style, a description."""
    by_name = {b.name: b for b in registry}
    out: list[str] = []
    seen: set[str] = set()
    for i, b in enumerate(registry):
        where = f"bound {b.name!r} (entry {i + 1} in gputop/diagnose/bounds.py)"
        if not b.name or b.name in seen:
            out.append(f"{where}: its name is empty or declared twice")
        seen.add(b.name)
        if not callable(b.rule):
            out.append(
                f"{where}: no rule (a function in gputop/diagnose/rules/: RuleInputs -> Finding)"
            )
        if not callable(b.levers):
            out.append(f"{where}: no levers (a function in levers.py: RuleInputs -> levers)")
        if not isinstance(b.tier, Tier):
            out.append(f"{where}: no tier (Tier.OVERRIDE, Tier.NORMAL or Tier.FALLBACK)")
        if not isinstance(b.style, Style):
            out.append(f"{where}: no style (Style.GOOD, Style.NEUTRAL or Style.BAD)")
        if not b.description.strip() or "\n" in b.description:
            out.append(f"{where}: no description (one line: what the bound means)")
        for other in b.explains:
            if other not in by_name:
                out.append(f"{where}: explains {other!r}, which is no bound")
    return out


def _rule_problems(registry: tuple[Bound, ...]) -> list[str]:
    """Entries sharing a rule stand together, and the rule names one of them."""
    out: list[str] = []
    empty = RuleInputs(None, None, None, None)
    for rule in dict.fromkeys(b.rule for b in registry if callable(b.rule)):
        sharing = [b for b in registry if b.rule is rule]
        names = [b.name for b in sharing]
        first = registry.index(sharing[0])
        if registry[first : first + len(sharing)] != tuple(sharing):
            out.append(f"bounds {names}: entries sharing the rule {rule.__name__} must be adjacent")
        try:
            named = rule(empty).bound  # with no inputs every rule says which bound it is about
        except Exception as e:  # reported, not raised: this is a checker
            out.append(f"bounds {names}: the rule {rule.__name__} fails on no inputs: {e!r}")
            continue
        if named not in names:
            out.append(
                f"bounds {names}: the rule {rule.__name__} names {named!r}, no entry of its own"
            )
    return out


def _name_problems(registry: tuple[Bound, ...]) -> list[str]:
    """The registry and gputop/vocab/bounds.py name the same bounds, and no rule spells one."""
    names = {b.name for b in registry}
    out = [
        f"gputop/vocab/bounds.py names {name!r}, which has no entry"
        for name in bound_names.NAMES
        if name not in names
    ]
    out += [
        f"bound {b.name!r}: not named in gputop/vocab/bounds.py (NAMES)"
        for b in registry
        if b.name not in bound_names.NAMES
    ]
    out += [
        f"{where}: the bound {name!r} spelled as a string (use gputop/vocab/bounds.py's "
        "name: a misspelling there fails at import, here it silently never matches)"
        for where, name in spelled_bounds()
    ]
    return out


def _slice_problems(registry: tuple[Bound, ...]) -> list[str]:
    """Every budget slice has a bound naming its loss, and a bound names slices only."""
    out = [
        f"bound {b.name!r}: names the slice {x!r}, which is no budget slice"
        for b in registry
        for x in b.slices
        if x not in slices.SLICES
    ]
    claimed = {x for b in registry for x in b.slices}
    out += [
        f"budget slice {x!r}: no bound names its loss (Bound.slices)"
        for x in slices.SLICES
        if x not in claimed
    ]
    return out


def _schema_problems(registry: tuple[Bound, ...], enum_: list[str]) -> list[str]:
    """diagnose's JSON Schema enumerates exactly the registry's bounds."""
    names = {b.name for b in registry}
    out = [
        f"bound {b.name!r}: not in gputop/schemas/diagnose.schema.json "
        "($defs.finding.properties.bound.enum)"
        for b in registry
        if b.name not in enum_
    ]
    out += [
        f"gputop/schemas/diagnose.schema.json's bound enum has {name!r}: no entry"
        for name in enum_
        if name not in names
    ]
    return out


NAMING_CALLS = {"finding": (0, 1), "band": (2, None)}
"""The calls in the rules that take bound names, by the positions of those arguments (a slice
of the positional arguments): the bound a finding is about, the bounds whose band a threshold
follows."""


def spelled_bounds(rules_dir: Path = Path(rules.__file__).parent) -> list[tuple[str, str]]:
    """(file:line, text) for every string literal a rule passes where a bound name goes
    (``NAMING_CALLS``) or compares with the bound held (``sig.holding``): each should be a name
    from ``gputop.vocab.bounds``, so that a misspelled one (a band that would never hold) cannot
    be written. Read from the rules' source, so it sees every branch, taken or not."""
    out = []
    for path in sorted(rules_dir.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            args: list[ast.expr] = []
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                span = NAMING_CALLS.get(node.func.id)
                if span is not None:
                    args = node.args[span[0] : span[1]]
            elif isinstance(node, ast.Compare) and "holding" in ast.unparse(node.left):
                args = list(node.comparators)
            for arg in args:
                for c in ast.walk(arg):
                    if isinstance(c, ast.Constant) and isinstance(c.value, str):
                        out.append((f"gputop/diagnose/rules/{path.name}:{c.lineno}", c.value))
    return out
