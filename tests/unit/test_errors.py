"""The error family (gputop/errors.py): every error a user can meet anywhere in gputop has an
exit status the manual's table explains and a line saying when it happens, and ``cli.main``
says each as one line and ends with its status, never a traceback."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import gputop
from gputop import cli
from gputop.commands import docs
from gputop.errors import GputopError, exit_status_table, status_classes

SKIPPED = ("gputop.__main__", "gputop.agent._bootstrap")
"""Importing these runs something: gputop itself, the agent inside a job."""
OPTIONAL = {"torch", "textual"}
"""A module that needs one of these is left out only when it cannot be imported here."""


def module_names() -> list[str]:
    """Every module under gputop/ by its file: pkgutil.walk_packages passes over folders without
    an ``__init__.py`` (record, ui), whose modules import all the same."""
    root = Path(gputop.__file__).parent
    names = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return [n for n in names if not n.startswith(SKIPPED)]


def import_every_module() -> None:
    """Every module under gputop/, so that every error class there is defined."""
    for name in module_names():
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as e:
            if (e.name or "").split(".")[0] not in OPTIONAL:
                raise


def family() -> list[type[GputopError]]:
    """Every subclass of GputopError defined in gputop, by name."""
    import_every_module()
    found: set[type[GputopError]] = set()
    todo = [GputopError]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub.__module__.startswith("gputop.") and sub not in found:
                found.add(sub)
                todo.append(sub)
    return sorted(found, key=lambda c: (c.__module__, c.__name__))


def status_class_of(error: type[GputopError]) -> type[GputopError]:
    """The first status class in ``error``'s MRO: the table row that speaks for it."""
    return next(c for c in error.__mro__ if c in status_classes())


def test_every_error_has_a_status_the_table_explains_and_says_when():
    errors = family()
    names = {c.__name__ for c in errors}
    assert {"TargetNotFound", "RecordingError", "RecordError", "RunError", "UsageError",
            "SimConfigError", "CaptureBoundsError", "NoSuchGpu"} <= names  # fmt: skip
    statuses = {status for status, _ in exit_status_table()}
    for error in errors:
        home = status_class_of(error)  # StopIteration: it derives from no status class
        assert error.exit_status == home.exit_status, error
        assert error.with_usage == home.with_usage, error
        assert str(error.exit_status) in statuses, error
        when = vars(error).get("when")
        assert isinstance(when, str) and when.strip(), f"{error.__qualname__} says no `when`"
        assert "\n" not in when, error


def test_a_message_with_the_usage_exits_2_as_argparse_does():
    for error in family():
        assert not error.with_usage or error.exit_status == 2, error


def test_the_table_starts_with_done_and_lists_every_status_class():
    rows = exit_status_table()
    assert rows[0] == ("0", "done")
    for c in status_classes():
        assert (str(c.exit_status), c.when) in rows


@pytest.mark.parametrize("error", status_classes(), ids=lambda c: c.__name__)
def test_cli_main_says_each_status_as_one_line_and_exits_with_it(error, monkeypatch, capsys):
    def fails(args):
        raise error("the thing failed\nsay what to do")

    monkeypatch.setattr(docs, "run", fails)
    if error.with_usage:
        with pytest.raises(SystemExit) as e:
            cli.main(["docs"])
        assert e.value.code == error.exit_status
        err = capsys.readouterr().err
        assert err.startswith("usage: gputop docs")
        assert err.splitlines()[-1] == "gputop docs: error: the thing failed say what to do"
    else:
        assert cli.main(["docs"]) == error.exit_status
        err = capsys.readouterr().err
        assert err == "gputop: the thing failed say what to do\n"
    assert "Traceback" not in err
