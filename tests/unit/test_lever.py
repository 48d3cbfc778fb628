"""A lever declares the slice it saves from and the setups it belongs to
(``diagnose/lever.py``), and what it saves follows from that (``diagnose/saving.py``)."""

from __future__ import annotations

import pickle

from gputop.diagnose.lever import Lever, advice, declared
from gputop.diagnose.saving import saving_of
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.model.budget import Budget
from gputop.vocab import budget as slices


def test_a_plain_text_saves_from_the_slice_of_whoever_offers_it():
    own = Lever("gc.set_threshold(...)", saves=slices.GC)
    look = advice("py-spy dump")
    got = declared(["evaluate less often", own, look], slices.EVAL)
    assert got == ("evaluate less often", own, look)  # a lever is its text
    assert [x.saves for x in got] == [slices.EVAL, slices.GC, None]
    assert got[2].advice and all(isinstance(x, Lever) for x in got)


def test_a_lever_is_its_text_wherever_it_goes():
    lever = Lever("DDP bucket_cap_mb=25 -> 50", saves=slices.COMMS, setups={"DDP"})
    assert lever == "DDP bucket_cap_mb=25 -> 50" and lever.startswith("DDP")
    again = pickle.loads(pickle.dumps(lever))
    assert (again.saves, again.setups) == (slices.COMMS, frozenset({"DDP"}))


class _Budget:
    def __init__(self, shares: dict[str, float]) -> None:
        self.shares = shares

    def share(self, name: str) -> float:
        return self.shares.get(name, 0.0)


NO_INPUTS = RuleInputs(None, None, None, None)


def budget(**shares: float) -> Budget:
    return _Budget(shares)  # type: ignore[return-value]


def test_what_a_lever_saves_is_its_slice_times_the_part_it_removes():
    s = budget(eval=0.4, log=0.2)
    default = saving_of(Lever("evaluate less often", saves=slices.EVAL), NO_INPUTS, s)
    assert default is not None and default.share == 0.2  # the slice's own estimate: half
    assert default.condition == "if it evaluated half as often"
    thread = Lever("log in a thread", saves=slices.LOG, removes=1.0, condition="if moved")
    got = saving_of(thread, NO_INPUTS, s)
    assert got is not None and (got.share, got.condition) == (0.2, "if moved")
    assert (
        saving_of(Lever("a larger eval batch", saves=slices.EVAL, removes=0.0), NO_INPUTS, s)
        is None
    )
    assert saving_of(advice("py-spy dump"), NO_INPUTS, s) is None
    assert saving_of("a plain text from a recording", NO_INPUTS, s) is None
    assert (
        saving_of(Lever("bigger buckets", saves=slices.COMMS), NO_INPUTS, budget(comms=0.5)) is None
    )
