"""A lever fits the job's setup (``diagnose/lever_fit.py``): it declares the setups it belongs to,
and what fits a job never names a knob of a wrapper, backend or framework the job does not
have (checked against the texts: ``tests/knobs.py``), through every lever the comms and hung
bounds offer."""

from __future__ import annotations

import pytest
from knobs import names_a_missing_knob

from gputop.diagnose import bound_levers as levers
from gputop.diagnose.lever import Lever, advice
from gputop.diagnose.lever_fit import fits
from gputop.vocab.setup import DDP, DEEPSPEED, DIRECT, FSDP1, FSDP2, LIGHTNING, NONE

KINDS = (DDP, FSDP1, FSDP2, DEEPSPEED, DIRECT, NONE)


def unfit(levers, setup) -> list[str]:
    return [x for x in levers if not fits(x, setup)]


def wrong(levers, setup) -> list[str]:
    """Levers that fit by their declarations but name a knob the job lacks."""
    return [x for x in levers if fits(x, setup) and names_a_missing_knob(x, setup)]


def setup(kind: str | None, backend: str = "gloo", framework: str | None = None) -> dict:
    return {
        "parallel": {"kind": kind, "backend": backend} if kind else None,
        "framework": {"kind": framework} if framework else None,
    }


@pytest.mark.parametrize("kind", KINDS)
def test_each_wrappers_levers_fit_only_that_wrapper(kind):
    now = {"bucket_cap_mb": 25.0, "gradient_as_bucket_view": False, "static_graph": False,
           "reshard_after_forward": True, "sharding_strategy": "FULL_SHARD",
           "backward_prefetch": None, "forward_prefetch": False, "overlap_comm": False,
           "reduce_bucket_size": 5e8}  # fmt: skip
    offered = levers.wrapper_levers(kind, now.get)
    assert offered and not unfit(offered, setup(kind)), offered
    for other in (*KINDS, None):
        assert not wrong(offered, setup(other)), (kind, other)
        if other != kind and kind in (DDP, FSDP1, FSDP2, DEEPSPEED):
            assert unfit(offered, setup(other)), (kind, other)  # its own knobs are its own


def test_an_fsdp2_job_is_never_told_ddp_knobs():
    ddp = Lever("DDP bucket_cap_mb=25 -> 50: fewer, larger all-reduces", setups={DDP})
    assert not fits(ddp, setup(FSDP2)) and not fits(ddp, setup(DIRECT)) and not fits(ddp, None)
    assert fits(ddp, setup(DDP))
    # suggesting a wrapper to a job without one is no knob of it
    (_, suggest) = levers.wrapper_levers(DIRECT, {}.get)
    assert suggest.startswith("or let DDP do it") and fits(suggest, setup(DIRECT))


def test_nccl_advice_only_on_nccl_and_framework_settings_only_in_that_framework():
    recorder = advice("NCCL flight recorder: TORCH_NCCL_TRACE_BUFFER_SIZE=2000", {"nccl"})
    assert not fits(recorder, setup(DDP, "gloo")) and fits(recorder, setup(DDP, "nccl"))
    lightning = {"kind": LIGHTNING, "val_check_interval": 50}
    (val,) = levers.framework_side({"framework": lightning}, "eval")
    assert val.startswith("Trainer(val_check_interval=50 -> 100)")
    assert fits(val, setup(NONE, framework=LIGHTNING)) and not fits(val, setup(NONE))
    assert val.saves == "eval"


def test_a_lever_read_back_from_a_recording_declares_nothing_and_fits_any_job():
    assert fits("DDP bucket_cap_mb=25 -> 50", setup(FSDP2))  # a plain text: shown as it was
