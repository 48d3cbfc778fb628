"""The comms wait's cause (``diagnose/causes/comms.py``): the job's wrapper with the settings
that decide its collectives, the bytes a step carries and the rate they move at."""

from __future__ import annotations

from types import MappingProxyType as M

from builders import agent, step

from gputop.diagnose import evaluate, reduce_windows
from gputop.model.steps import AgentsSample

PHASES = {"forward": 20.0, "backward": 20.0, "grad_sync": 60.0, "optimizer": 2.0}


def job(parallel: dict | None, comm_bytes: int | None = 256_000_000,
        comm_ms: float | None = None, by: dict | None = None) -> AgentsSample:  # fmt: skip
    fp = M({"parallel": M(parallel)} if parallel else {})
    comm_ns = round(comm_ms * 1e6) if comm_ms else None
    out = []
    for r in (0, 1):
        steps = tuple(step(i, int(i * 1e9), PHASES, comm_bytes=comm_bytes, comm_ns=comm_ns,
                           comm_by=M(by or {}))
                      for i in range(30))  # fmt: skip
        out.append(agent(100 + r, steps, rank=r, world_size=2, fingerprint=fp))
    return AgentsSample(target=50, t=1.0, wall=0.0, agents=tuple(out))


def principal(agents: AgentsSample):
    v, _ = evaluate(reduce_windows([], [], agents=agents), now=10.0)
    assert v.principal is not None and v.principal.bound == "comms", v.principal
    return v.principal


def test_ddp_names_its_bytes_settings_and_rate():
    ddp = {"kind": "DDP", "backend": "gloo", "bucket_cap_mb": 25.0,
           "gradient_as_bucket_view": False, "static_graph": False}  # fmt: skip
    p = principal(job(ddp))
    assert p.cause.text == (
        "DDP all-reduces its gradients: 256.0 MB a step over gloo (bucket_cap_mb=25.0, "
        "gradient_as_bucket_view=False); the step waits 60 ms for them (4.27 GB/s)"
    )
    assert p.levers[0].startswith("DDP bucket_cap_mb=25 -> 50")
    assert p.saving is None  # what a bigger bucket saves is not measured


def test_a_loops_own_collectives_and_fsdp2_are_said_as_theirs():
    direct = principal(job({"kind": "collectives", "backend": "gloo"}))
    assert direct.cause.text.startswith("the loop's own collectives move: 256.0 MB a step")
    assert not any("bucket_cap_mb" in x for x in direct.levers)
    fsdp = principal(job({"kind": "FSDP2", "backend": "gloo", "reshard_after_forward": True}))
    assert fsdp.cause.text.startswith("FSDP2 gathers its parameters and reduces its gradients")
    assert "(reshard_after_forward=True)" in fsdp.cause.text
    assert not any("DDP" in x for x in fsdp.levers), fsdp.levers


def test_no_bytes_counted_is_no_cause():
    assert principal(job({"kind": "DDP", "backend": "gloo"}, comm_bytes=None)).cause is None


def test_what_hid_behind_compute_is_the_outstanding_time_the_step_did_not_wait_for():
    ddp = {"kind": "DDP", "backend": "gloo", "bucket_cap_mb": 25.0}
    p = principal(job(ddp, comm_ms=80.0))  # outstanding 80 ms, 60 of them waited for
    assert p.cause.text.endswith(
        "; outstanding 80 ms a step (3.20 GB/s), the step waits 60 ms of it: 25% hidden "
        "behind compute"
    ), p.cause.text
    assert any("outstanding 80 ms a step (median of" in e.text for e in p.cause.evidence)
    blocking = principal(job({"kind": "collectives", "backend": "gloo"}, comm_ms=58.0))
    assert blocking.cause.text.endswith("; outstanding 58 ms a step (4.41 GB/s), all of it "
                                        "waited for"), blocking.cause.text  # fmt: skip


def test_nccl_collectives_complete_where_the_host_does_not_see_them():
    p = principal(job({"kind": "DDP", "backend": "nccl"}, comm_ms=5.0))
    assert "outstanding" not in p.cause.text and "hidden" not in p.cause.text
    assert p.cause.text.endswith("the step waits 60 ms for them (4.27 GB/s)"), p.cause.text


def test_the_costliest_caller_is_named_and_its_levers_lead():
    """DDP's gradients and a ZeroRedundancyOptimizer's broadcasts after step(): the optimizer's
    calls are outstanding longer, so they are named first, with the lever that fits them."""
    ddp = {"kind": "DDP", "backend": "gloo", "bucket_cap_mb": 25.0}
    by = {"DDP": (100_000_000, 10_000_000, 2),
          "ZeroRedundancyOptimizer": (156_000_000, 45_000_000, 8)}  # fmt: skip
    p = principal(job(ddp, by=by))
    assert p.cause.text.endswith(
        "; by caller: ZeroRedundancyOptimizer 156.0 MB in 8 calls, 45 ms outstanding; DDP "
        "100.0 MB in 2 calls, 10 ms outstanding"
    ), p.cause.text
    assert p.levers[0].startswith("ZeroRedundancyOptimizer(overlap_with_ddp=True)"), p.levers
    assert any(x.startswith("DDP bucket_cap_mb=25 -> 50") for x in p.levers)


def test_a_loops_own_function_is_named_with_its_calls():
    by = {"train.py:sync_metrics": (256_000_000, 50_000_000, 40)}
    p = principal(job({"kind": "collectives", "backend": "gloo"}, by=by))
    assert "by caller: train.py:sync_metrics 256.0 MB in 40 calls" in p.cause.text
    assert p.levers[0].startswith("sync_metrics calls the collectives itself (40 a step)")


def test_the_wrapper_alone_adds_nothing_to_the_line():
    by = {"DDP": (256_000_000, 50_000_000, 2)}
    p = principal(job({"kind": "DDP", "backend": "gloo"}, by=by))
    assert "by caller" not in p.cause.text
