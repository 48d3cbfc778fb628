"""The verdict's decisions read each share with its interval: a held slice does not leave the
floor while it is below it by less than it moves, and two slices within their intervals do
not swap the principal; the interval is said where the share is."""

from __future__ import annotations

from gputop.diagnose.thresholds import FLOOR, HELD_FLOOR
from gputop.diagnose.verdict import SWITCH_POINTS, _leading_slice, holds, outgrows
from gputop.model.budget import Budget, RankBudget, Slice, share_text
from gputop.vocab import budget as b


def budget(**slices: tuple[float, float, float]) -> Budget:
    """Slices as name=(share, sampling error, spread); compute takes the rest."""
    shares = {n: slices.get(n, (0.0, 0.0, 0.0))[0] for n in b.SLICES}
    shares[b.COMPUTE] = 1 - sum(v for n, v in shares.items() if n != b.COMPUTE)
    rank = RankBudget(1, 0, "agent", shares, 60.0, 500)
    out = tuple(
        Slice(n, shares[n], (), slices[n][1], (), slices[n][2]) if n in slices
        else Slice(n, shares[n])
        for n in b.SLICES
    )  # fmt: skip
    return Budget(out, (rank,), rank)


def test_a_held_slice_stays_while_below_its_band_by_less_than_it_moves():
    near = HELD_FLOOR - 0.01
    moving = budget(data=(near, 0.0, 0.02))
    steady = budget(data=(near, 0.0, 0.002))
    assert _leading_slice(moving, b.DATA) is moving.slice(b.DATA)
    assert _leading_slice(steady, b.DATA) is None
    assert not holds(budget(data=(near, 0.03, 0.02)).slice(b.DATA), HELD_FLOOR)  # samples'


def test_a_slice_enters_on_what_its_measure_vouches_for_not_its_spread():
    clocked = budget(eval=(FLOOR + 0.01, 0.0, 0.05))
    sampled = budget(eval=(FLOOR + 0.01, 0.02, 0.0))
    assert _leading_slice(clocked, None) is clocked.slice(b.EVAL)
    assert _leading_slice(sampled, None) is None


def test_two_slices_within_their_intervals_do_not_swap():
    gap = SWITCH_POINTS + 0.01
    wide = budget(data=(0.30, 0.0, 0.05), eval=(0.30 + gap, 0.0, 0.05))
    narrow = budget(data=(0.30, 0.0, 0.005), eval=(0.30 + gap, 0.0, 0.005))
    assert not outgrows(wide.slice(b.EVAL), wide.slice(b.DATA))
    assert _leading_slice(wide, b.DATA).name == b.DATA
    assert _leading_slice(narrow, b.DATA).name == b.EVAL
    assert _leading_slice(wide, None).name == b.EVAL  # nothing held: the largest


def test_the_share_is_said_with_its_margin_once_it_is_a_point():
    x = budget(data=(0.4, 0.02, 0.015)).slice(b.DATA)
    assert share_text(x) == "40% ±2"
    assert share_text(budget(data=(0.4, 0.0, 0.004)).slice(b.DATA)) == "40%"
