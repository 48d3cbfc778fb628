"""An evaluation pass timed by its own clock: from ``model.eval()`` to ``model.train()`` on a
model the step computes on, everything the training thread does is the evaluation's (its
forwards, its loader's waits, the metrics computed in Python between them), not only the
forwards that run with gradients off. Plain loops, Lightning's and transformers' loops all put
the model in eval mode around validation, so the pass is delimited where it happens instead
of being guessed from stack samples.

A backward while the pass is open means the job trains in eval mode (to freeze dropout or
batch norm): the pass closes and the mode is no clock for this process any more.
"""

from __future__ import annotations

from .recorder import AutoPhase, StepRecorder


class EvalPass:
    """The pass's state and its phase: an ``eval`` phase of its own, apart from the one the
    forwards open (each phase object is not re-entrant; two with one id nest, and the time of
    both is the evaluation's). Training thread only; the caller checks that."""

    __slots__ = ("off", "phase")

    def __init__(self, rec: StepRecorder) -> None:
        self.phase = AutoPhase(rec, rec.auto["eval"].id, "eval")
        rec.spans.append(self.phase)
        self.off = False
        """The job trains in eval mode: the mode says nothing about evaluation here."""

    @property
    def open(self) -> bool:
        return bool(self.phase.depth)

    def mode(self, training: bool) -> None:
        """A model the step computes on was put in training (``True``) or eval mode."""
        if self.off:
            return
        if not training:
            if not self.phase.depth:
                self.phase.open()  # nothing while a user's marker is open (theirs wins)
        elif self.phase.depth:
            self.phase.close()

    def trains(self) -> None:
        """A backward began: a pass still open was training after all."""
        if self.phase.depth:
            self.phase.close()
            self.off = True
