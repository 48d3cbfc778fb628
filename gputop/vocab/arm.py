"""The events ``--arm`` may name (``gputop/arm/triggers`` reads them from the verdict), and how
a list of them is written on the command line and in the config file."""

from __future__ import annotations

HANG, STRAGGLING, REGRESSION, VERDICT, MEMORY = (
    "hung",
    "straggler",
    "regression",
    "verdict",
    "memory",
)
TRIGGERS = (HANG, STRAGGLING, REGRESSION, VERDICT, MEMORY)
"""In the order the help lists them."""
ALL = "all"


def parse_triggers(text: str) -> frozenset[str]:
    """ "all", or a comma-separated list of TRIGGERS; ValueError says which names are allowed."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names or names == [ALL]:
        return frozenset(TRIGGERS)
    unknown = [n for n in names if n not in TRIGGERS]
    if unknown:
        raise ValueError(
            f"{','.join(unknown)}: not a trigger; choose from {', '.join(TRIGGERS)} or {ALL}"
        )
    return frozenset(names)
