"""A lever declares the slice it saves from and the setups it belongs to
(``diagnose/lever.py``), and what it saves follows from that (``diagnose/saving.py``)."""

from __future__ import annotations

import pickle

from gputop.diagnose.lever import Lever, advice, declared, sized
from gputop.diagnose.saving import saving_of
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.model.budget import Budget, Slice
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
    def __init__(self, shares: dict[str, float], errors: dict[str, float]) -> None:
        self.shares, self.errors = shares, errors

    def share(self, name: str) -> float:
        return self.shares.get(name, 0.0)

    def slice(self, name: str) -> Slice:
        return Slice(name, self.share(name), error=self.errors.get(name, 0.0))


NO_INPUTS = RuleInputs(None, None, None, None)


def budget(errors: dict[str, float] | None = None, **shares: float) -> Budget:
    return _Budget(shares, errors or {})  # type: ignore[return-value]


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


def test_a_lever_sized_by_its_cause_saves_a_range_from_its_band_and_the_slice_error():
    """A cause's lever removes 70% of its slice (50-90% by what it rests on); the slice is
    40% +- 5 points of sampling error: 28% of the step, at least 17.5%, at most 40.5%."""
    lever = sized("tokenise ahead", slices.DATA, 0.7, (0.9, 0.5), "if the text went")
    assert (lever.removes, lever.band) == (0.7, (0.5, 0.9))  # its ends in order
    got = saving_of(lever, NO_INPUTS, budget({"data": 0.05}, data=0.4))
    assert got is not None
    assert (got.share, got.low, got.high) == (0.28, 0.175, 0.405)
    assert got.text == "~1.4x steps/s (saves 18-40% of a step) if the text went"
    plain = saving_of(Lever("evaluate less often", saves=slices.EVAL), NO_INPUTS,
                      budget(eval=0.4))  # fmt: skip
    assert plain is not None and plain.low == plain.share == plain.high == 0.2
    assert plain.text == "~1.2x steps/s (saves 20% of a step) if it evaluated half as often"


def test_a_sized_lever_stays_within_its_band_and_its_slice():
    lever = sized(Lever("bucket", setups={"DDP"}), slices.COMMS, 1.4, (-0.2, 1.3), "x")
    assert (lever.removes, lever.band, lever.setups) == (1.0, (0.0, 1.0), frozenset({"DDP"}))
