"""A lever: one thing to change, and what it declares: the budget slice it saves from, how
much of it (by default the slice's own estimate, ``saving.REMOVES``), and the setups it belongs
to (a knob of DDP belongs to DDP: ``lever_fit.py`` never offers it to a job without DDP).

A lever is its text: every output, a recording and the tests read it as the line the user
reads, so ``Lever`` is a ``str`` that carries its declarations (as ``markupsafe.Markup``
carries its escaping) rather than a second structure kept beside the texts. A lever read
back from a recording is a plain ``str``: it declares nothing, and fits any setup. Pure."""

from __future__ import annotations

from collections.abc import Iterable


class Lever(str):
    """The text, with the slice it saves from and the setups it belongs to."""

    saves: str | None
    """The budget slice it shrinks (``vocab/budget.py``); None: the slice of the bound or cause
    that offers it (``declared``), or none at all for advice."""
    setups: frozenset[str]
    """The parallel wrappers, backends or frameworks (``vocab/setup.py``) it is a knob of; the
    job must have one of them. Empty: any job."""
    removes: float | None
    """Share of its slice it takes away, where it differs from the slice's estimate (0: an
    amount the budget cannot size; above 1 for one that also gives back time the slice's work
    takes from another, ``sized``'s ``most``)."""
    condition: str
    """What that share assumes, where it differs from the slice's ("if it logged in a thread")."""
    band: tuple[float, float] | None
    """The least and most of its slice it may take away, where a cause sized it from the job's
    numbers (the spread of what it rests on); None: ``removes`` at both ends."""
    advice: bool
    """Where to look or what to check: it changes nothing by itself, so it saves nothing."""

    def __new__(
        cls,
        text: str,
        saves: str | None = None,
        setups: Iterable[str] = (),
        removes: float | None = None,
        condition: str = "",
        advice: bool = False,
        band: tuple[float, float] | None = None,
    ) -> Lever:
        self = super().__new__(cls, text)
        self.saves = saves
        self.setups = frozenset(setups)
        self.removes = removes
        self.condition = condition
        self.advice = advice
        self.band = band
        return self


def sized(
    lever: str, saves: str, removes: float, band: tuple[float, float], condition: str,
    most: float = 1.0,
) -> Lever:  # fmt: skip
    """``lever`` (a text, or a declared lever keeping its setups) sized by a cause from this
    job's numbers: the share of ``saves`` it removes, the least and most it may, and what
    that rests on. ``most``: the ceiling on that share, above 1 for a lever that also gives
    back time its slice's work takes from another (the CPU busy workers take from the
    training thread on saturated CPUs)."""
    setups = lever.setups if isinstance(lever, Lever) else ()
    low, high = sorted(max(0.0, min(most, x)) for x in band)
    mid = max(low, min(high, removes))
    return Lever(str(lever), saves, setups, mid, condition, band=(low, high))


def declared(items: Iterable[str], saves: str | None) -> tuple[Lever, ...]:
    """Levers as a bound or cause offers them: a plain text saves from ``saves`` (the slice
    its bound or cause stands for); a lever that declared its own slice keeps it."""
    out = []
    for x in items:
        if not isinstance(x, Lever):
            out.append(Lever(x, saves=saves))
        elif x.saves is None and saves is not None and not x.advice:
            out.append(Lever(str(x), saves, x.setups, x.removes, x.condition, band=x.band))
        else:
            out.append(x)
    return tuple(out)


def advice(text: str, setups: Iterable[str] = ()) -> Lever:
    """A lever that changes nothing by itself (where to look, what to check): no saving."""
    return Lever(text, setups=setups, advice=True)
