"""Levers per bound class, cheapest first (domain.md), naming the user's own settings when the
agent reported them and sized against the effective CPUs when the host source knows them."""

from __future__ import annotations

from typing import Any

from gputop.diagnose.signals import MEM_NEAR, WORKERS_WAIT, RuleInputs


def _loader(sig: RuleInputs) -> dict[str, Any]:
    fp = sig.steps.fingerprint if sig.steps else {}
    return dict(fp.get("dataloader") or {})


def _cpus(sig: RuleInputs) -> tuple[float | None, str]:
    h = sig.host
    if h and h.effective_cpus:
        return (
            h.effective_cpus,
            f"{h.effective_cpus:g}-CPU {'quota' if 'quota' in h.cpu_source else 'machine'}",
        )
    return None, "CPU"


CHECKPOINT_LEVER = (
    "checkpoint less often or asynchronously (torch.distributed.checkpoint.async_save)"
)
LOG_LEVER = "log less often; gc.disable() with a manual gc.collect() every N steps"
GC_LEVERS = (
    "gc.freeze() once after setup: long-lived objects (dataset index, caches) leave the "
    "collector, so full collections stop traversing them",
    "gc.disable() with a manual gc.collect() every N steps (e.g. at a logging step)",
    "fewer long-lived Python containers: arrays or tensors in place of lists and dicts",
)


def _side_work_levers(sig: RuleInputs) -> tuple[str, ...]:
    """Garbage collection's levers first when measured GC pauses outweigh the other side work
    (the excess of the spikes attributed to it, or its share against checkpoint/logging)."""
    st = sig.steps
    if st is None:
        return (CHECKPOINT_LEVER, LOG_LEVER)
    gc_ms = sum(s.ms - st.median_ms for s in st.spikes if s.grew.startswith("gc"))
    other_ms = sum(s.ms - st.median_ms for s in st.spikes if not s.grew.startswith("gc"))
    side = st.shares.get("checkpoint", 0.0) + st.shares.get("eval_log", 0.0)
    gc_share = st.gc_share or 0.0
    if (gc_ms and gc_ms >= other_ms) or (gc_share > 0.1 and gc_share >= side):
        out = list(GC_LEVERS)
        grown = {s.grew for s in st.spikes}
        if side > 0.05 or grown & {"checkpoint", "eval_log"}:
            out.append(CHECKPOINT_LEVER)
        return tuple(out)
    return (CHECKPOINT_LEVER, LOG_LEVER)


def levers_for(bound: str, sig: RuleInputs) -> tuple[str, ...]:
    loader = _loader(sig)
    cpus, where = _cpus(sig)
    fp = sig.steps.fingerprint if sig.steps else {}
    if bound.startswith("data-input"):
        workers = loader.get("num_workers")
        target = max(1, int(cpus) - 1) if cpus else None
        first = (
            f"DataLoader num_workers={workers} on a {where}: try {target or 'cores-1'}"
            if workers is not None
            else f"DataLoader(num_workers={target or 'cores-1'})"
        )
        busy = sig.host.workers_busy if sig.host else None
        if bound == "data-input" and workers and busy is not None and busy < WORKERS_WAIT:
            # workers that wait (remote reads, an API) cost no CPU: more of them overlap the
            # waits, even past the core count, where CPU-bound workers would only contend
            first = (
                f"DataLoader num_workers={workers}: try {2 * workers}; the workers wait rather "
                f"than compute, so more of them overlap the waits even past the {where}"
            )
        h = sig.host
        if h and h.mem_near:
            # every worker adds memory: near the limit the next one ends in an OOM kill
            first += (
                f" only after freeing memory (working set at {h.mem_share or 0:.0%} of the limit)"
            )
        out = []
        if bound == "data-input/cpu-transform" and workers:
            out.append(
                "move transforms to the GPU (torchvision v2 on tensors, DALI, kornia); more "
                f"workers help only up to the {where}"
            )
        if bound == "data-input/io":
            out.append("stage the data on local NVMe; shard many small files into tar/WebDataset")
        if not workers or bound == "data-input":
            out.append(first)
        if loader.get("persistent_workers") is False or not loader:
            out.append("persistent_workers=True (workers survive between epochs)")
        if loader.get("pin_memory") is False or not loader:
            out.append("pin_memory=True with .to(device, non_blocking=True)")
        out.append(f"prefetch_factor=3-4 for bursty loading (now {loader.get('prefetch_factor')})")
        return tuple(out)
    if bound == "h2d-copy":
        pin = loader.get("pin_memory")
        return (
            f"pin_memory=True (now {pin}) and .to(device, non_blocking=True): both halves needed",
            "move fewer bytes: uint8 images normalised on the GPU, bf16 inputs",
        )
    if bound == "comms":
        return (
            "DDP(bucket_cap_mb=...) and gradient_as_bucket_view=True",
            "remove per-step host syncs (.item(), print of tensors)",
            "gradient accumulation: communicate every N micro-batches",
            "FSDP backward_prefetch / forward_prefetch",
            "check the NCCL transport (NCCL_DEBUG=INFO)",
        )
    if bound == "cpu-oversubscribed":
        omp = sig.host.omp if sig.host else None
        threads = fp.get("intra_op_threads")
        cap = max(1, int(cpus) - (sig.host.workers if sig.host else 0)) if cpus else None
        return (
            f"OMP_NUM_THREADS={omp or 'unset'}, torch threads {threads or '?'} on a {where}: "
            f"cap them at {cap or 'the quota'} (torch.set_num_threads)",
            "do not add DataLoader workers: they compete for the same CPUs",
        )
    if bound == "throttled-power":
        return (
            "the power limit is the cap: check `nvidia-smi -q -d POWER` and ask the provider",
            "timings from a throttled card are not comparable with others",
        )
    if bound == "throttled-thermal":
        return (
            "check cooling: fans, airflow, dust; tell the provider",
            "timings from a hot card are not comparable",
        )
    if bound == "host-overhead":
        return (
            "remove per-step syncs (.item(), .cpu(), printing tensors)",
            'torch.compile(mode="reduce-overhead") (CUDA graphs)',
            "a larger batch: fewer, bigger kernels",
        )
    if bound == "side-work":
        return _side_work_levers(sig)
    if bound == "straggler":
        return (
            "look at that rank: throttling or ECC on its GPU, data skew, NUMA placement",
            "bind each rank to its GPU's NUMA node",
        )
    if bound == "hung":
        waits = {u.phase for u in sig.stacks.unchanged} if sig.stacks else set()
        if "data wait" in waits:  # the main thread waits for a batch no worker will send
            return (
                "`gputop` key d (or py-spy dump) on the DataLoader workers: where they block",
                "DataLoader(timeout=...) turns a stuck worker into an error instead of a hang",
                "check the storage the workers read (a dead mount blocks reads for good)",
            )
        return (
            "`gputop` key d (or py-spy dump) on every rank",
            "NCCL flight recorder: TORCH_NCCL_TRACE_BUFFER_SIZE=2000, TORCH_NCCL_DUMP_ON_TIMEOUT=1",
            "set collective timeouts so a hang fails fast",
        )
    if bound == "host-memory-pressure":
        workers = loader.get("num_workers", sig.host.workers if sig.host else None)
        keep = (
            "keep the dataset in numpy arrays, tensors or an mmap'd file, not lists of Python "
            "objects: reading those writes their reference counts, so every worker copies them"
        )
        out = [keep]
        if workers:
            copies = "each may hold its own copy of the dataset"
            out.insert(0, f"DataLoader num_workers={workers}: fewer ({copies})")
            out.append(f"a smaller prefetch_factor (now {loader.get('prefetch_factor', '?')})")
        out.append(f"do not add workers or prefetch until the working set is below {MEM_NEAR:.0%}")
        return tuple(out)
    if bound == "memory-bandwidth":
        return (
            "fuse kernels: torch.compile",
            "fused attention (scaled_dot_product_attention)",
            "bf16 halves the bytes; avoid transposes and copies",
        )
    if bound == "gpu-compute":
        precision = fp.get("float32_matmul_precision")
        out = []
        if precision == "highest":
            out.append('TF32: torch.set_float32_matmul_precision("high") (now "highest")')
        if not fp.get("autocast"):
            out.append("bf16 autocast")
        out += [
            "SDPA / flash attention",
            "torch.compile"
            if not fp.get("compiled")
            else "torch.compile is on: check graph breaks",
            "a larger micro-batch up to the memory wall",
        ]
        return tuple(out)
    return ()
