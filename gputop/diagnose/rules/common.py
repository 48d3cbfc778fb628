"""What every rule shares: a finding built from its evidence, percentages as evidence shows
them, the band of a threshold while its bound is shown, the stack shares a rule may read,
and how a frame is named."""

from __future__ import annotations

from gputop.diagnose.findings import Evidence, Finding
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.model.budget import confidence
from gputop.model.stack_stats import in_stdlib
from gputop.model.stacks import Frame

STACK_SHARE = 0.30
"""Main threads in one kind of wait in over this share of stack samples."""
GPU_BUSY = 90.0
"""Mean GPU utilisation (%) from which the GPU counts as busy all the time."""

GPU_STARVED = 50.0
"""Mean GPU utilisation (%) below which a slow loader shows on the GPU too."""
MAIN_COMPUTING = 0.5
"""CPU (cores) of the main process from which it computes its batches rather than waits."""


def finding(
    bound: str,
    agree: list[Evidence],
    against: list[Evidence],
    missing: list[str],
    summary: str,
    impact: float = 0.0,
    need: int = 1,
) -> Finding:
    sources = {e.source for e in agree}
    fired = len(agree) >= need and len(sources) >= 1
    return Finding(
        bound=bound,
        fired=fired,
        confidence=confidence(len(sources), len(missing)) if fired else 0.0,
        summary=summary,
        evidence=tuple(agree + against),
        missing=tuple(missing),
        impact=impact,
    )


def size(n: float) -> str:
    """GiB with one decimal, MiB below 2 GiB (a 290-MiB limit is not "0.3 GiB")."""
    return f"{n / 2**30:.1f} GiB" if n >= 2 * 2**30 else f"{n / 2**20:.0f} MiB"


def pct(x: float) -> str:
    """A share as a percentage: whole numbers, one decimal under 10% where it matters (a 3.5%
    band is not "4%")."""
    v = 100 * x
    return f"{v:.1f}%" if v < 10 and abs(v - round(v)) >= 0.05 else f"{v:.0f}%"


HOLD = 0.7
"""The band of a threshold: a rule fires when its number crosses X and, while its bound is the
principal the verdict shows (``RuleInputs.holding``), keeps firing until the number falls
under HOLD * X. A share near its threshold (spikes entering and leaving the window, a GPU
mean around 90%) then does not flip the verdict on every reading; the value shown is the
threshold in force, so the evidence says which one applied."""


def band(threshold: float, sig: RuleInputs, *bounds: str) -> float:
    """The threshold in force: lowered to HOLD of itself while one of ``bounds`` is held."""
    return threshold * HOLD if sig.holding is not None and sig.holding in bounds else threshold


STACK_MIN = 5
"""Stack samples (dumps, one a second) a share needs before a rule reads it: one dump of five
is 20%, one of one is 100%."""


def stack_shares(sig: RuleInputs) -> dict[str, float] | None:
    """The main threads' phase shares, once there are STACK_MIN samples of them."""
    st = sig.stacks
    if st is None or st.samples < STACK_MIN:
        return None
    return st.main_shares


def at(f: Frame | None) -> str:
    """file:line of a frame, as findings and levers name places."""
    return f"{f.file}:{f.line}" if f and f.line else (f.file if f else "?")


def frame_name(f: Frame) -> str:
    """A function as a user knows it: subprocess.run, Queue.get, train_step."""
    module = f.file.rsplit("/", 1)[-1].removesuffix(".py")
    return f"{module}.{f.name}" if in_stdlib(f) and "." not in f.name else f.name
