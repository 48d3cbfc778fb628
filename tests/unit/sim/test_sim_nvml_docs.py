"""docs/sim-nvml.md lists exactly the NVML symbols the simulated driver generations export."""

from __future__ import annotations

import re

from tests_support import REPO

from gputop.sim import DRIVERS


def _documented() -> set[str]:
    """Symbols in the table's first column; ``nvmlX…Width`` after ``nvmlXGeneration`` expands."""
    names: set[str] = set()
    for line in (REPO / "docs" / "sim-nvml.md").read_text().splitlines():
        if not line.startswith("| `"):
            continue
        cell = line.split("|")[1]
        for name in re.findall(r"`([^`]+)`", cell):
            if name.startswith("…"):
                prev = next(n for n in reversed(re.findall(r"`(nvml[^`…]+)`", cell)))
                name = re.sub(r"[A-Z][a-z]+$", "", prev) + name[1:]
            names.add(name)
    return names


def test_table_lists_every_exported_symbol():
    exported = set().union(*(d.symbols for d in DRIVERS.values()))
    assert _documented() == exported
