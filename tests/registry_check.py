"""The bound registry's completeness check, kept with the tests that run it: what an entry of
``gputop/diagnose/bounds.py`` lacks, read from the entries, the rules' own source and the
diagnose tests' source. Parsing source is the tests' business, not the monitor's: nothing here
ships in ``gputop/`` (``tests/unit/diagnose/test_bounds.py`` prints what it finds, one line a
problem).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from pathlib import Path

from gputop.diagnose import rules
from gputop.diagnose.bounds import REGISTRY, Bound, Style, Tier
from gputop.diagnose.signals.inputs import RuleInputs
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
            out.append(f"{where}: no levers (a function in bound_levers.py: RuleInputs -> levers)")
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


def asserted_bounds(test_file: Path) -> set[str]:
    """The bounds a test file asserts as a verdict's principal or a finding's bound: an
    ``assert`` whose condition is (or is and-ed with) ``bound(...) == NAME`` or
    ``<finding>.bound == NAME``, NAME a string, a name of ``gputop.vocab.bounds``, or a
    parameter of the test whose ``pytest.mark.parametrize`` values are read. A bound that is
    only mentioned, compared with ``!=``, looked for among the secondaries (``any(...)``) or
    allowed as one of several (``in (...)``) is not asserted: a rule that stopped naming it
    would pass such a test."""
    out: set[str] = set()
    tree = ast.parse(test_file.read_text(), str(test_file))
    for test in ast.walk(tree):
        if not isinstance(test, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        params = _parametrized(test)
        for node in ast.walk(test):
            if isinstance(node, ast.Assert):
                for expected in _expected_bounds(node.test):
                    out.update(_values(expected, params))
    return out


def _expected_bounds(condition: ast.expr) -> list[ast.expr]:
    """The expected sides of the ``bound == expected`` comparisons an assert's condition holds
    on every path: itself, or each operand of a chain of ``and``."""
    if isinstance(condition, ast.BoolOp) and isinstance(condition.op, ast.And):
        return [e for part in condition.values for e in _expected_bounds(part)]
    if not (
        isinstance(condition, ast.Compare)
        and len(condition.ops) == 1
        and isinstance(condition.ops[0], ast.Eq)
    ):
        return []
    left, right = condition.left, condition.comparators[0]
    if _is_bound(left):
        return [right]
    if _is_bound(right):
        return [left]
    return []


def _is_bound(node: ast.expr) -> bool:
    """A verdict's bound as the tests read it: ``bound(v)``, ``principal(doc)`` or ``f.bound``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id in ("bound", "principal")
    return isinstance(node, ast.Attribute) and node.attr == "bound"


def _values(expected: ast.expr, params: dict[str, list[object]]) -> list[str]:
    """The bound names an expected side stands for."""
    if isinstance(expected, ast.Constant) and isinstance(expected.value, str):
        return [expected.value]
    if isinstance(expected, ast.Name):
        if expected.id in params:
            return [v for v in params[expected.id] if isinstance(v, str)]
        named = getattr(bound_names, expected.id, None)
        return [named] if isinstance(named, str) else []
    if isinstance(expected, ast.Attribute) and isinstance(expected.value, ast.Name):
        named = getattr(bound_names, expected.attr, None)  # bound_names.GPU_COMPUTE
        return [named] if isinstance(named, str) else []
    return []


def _parametrized(test: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, list[object]]:
    """A test's parameters -> their values, from ``pytest.mark.parametrize`` decorators whose
    names and values are literals."""
    out: dict[str, list[object]] = {}
    for deco in test.decorator_list:
        if not (
            isinstance(deco, ast.Call)
            and isinstance(deco.func, ast.Attribute)
            and deco.func.attr == "parametrize"
            and len(deco.args) >= 2
        ):
            continue
        try:
            names = ast.literal_eval(deco.args[0])
            cases = ast.literal_eval(deco.args[1])
        except ValueError:
            continue  # computed values: not read
        if isinstance(names, str):
            names = [n.strip() for n in names.split(",")]
        for case in cases:
            row = case if len(names) > 1 else (case,)
            for name, value in zip(names, row, strict=True):
                out.setdefault(name, []).append(value)
    return out
