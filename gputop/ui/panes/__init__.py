"""The monitor's panes, a module each: the widget and the text it draws side by side. A pane is
a ``Pane`` subclass (``pane.py``) in a module of this package: ``discovered`` finds them all,
in their ``ORDER``, so adding a pane is one module here (and its rules in the stylesheet)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from functools import cache

from gputop.ui.panes.pane import Context, Pane

__all__ = ["Context", "Pane", "discovered", "sources"]


@cache
def discovered() -> tuple[type[Pane], ...]:
    """Every pane of the package, top to bottom."""
    found: set[type[Pane]] = set()
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, Pane) and obj is not Pane and obj.__module__ == module.__name__:
                found.add(obj)
    return tuple(sorted(found, key=lambda p: (p.ORDER, p.__name__)))


def sources() -> frozenset[str]:
    """The target's sources some pane needs: a screen without them composes none of those."""
    return frozenset(p.SOURCE for p in discovered() if p.SOURCE is not None)
