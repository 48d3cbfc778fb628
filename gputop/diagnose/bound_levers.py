"""Levers per bound class, cheapest first (docs/facts/bounds.md, "Levers"), naming the user's
own settings when the agent reported them and sized against the effective CPUs when the host
source knows them.

One function per bound, registered in its entry in ``gputop/diagnose/bounds.py``; the verdict
calls it for a fired finding only."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gputop.diagnose import rules
from gputop.diagnose.lever import Lever, advice
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.diagnose.thresholds import FLOOR, MEM_NEAR, SIDE_SHARE, WORKERS_WAIT
from gputop.model.budget import Budget
from gputop.model.setup import parallel_kind, parallel_setting
from gputop.vocab import budget as slices
from gputop.vocab import stacks as stack
from gputop.vocab import steps as step
from gputop.vocab.setup import DDP, DEEPSPEED, DIRECT, FSDP1, FSDP2, LIGHTNING, TRANSFORMERS


def _fingerprint(sig: RuleInputs) -> Any:
    return sig.steps.fingerprint if sig.steps else {}


def _loader(sig: RuleInputs) -> dict[str, Any]:
    return dict(_fingerprint(sig).get("dataloader") or {})


def _cpus(sig: RuleInputs) -> tuple[float | None, str]:
    h = sig.host
    if h and h.effective_cpus:
        return (
            h.effective_cpus,
            f"{h.effective_cpus:g}-CPU {'quota' if 'quota' in h.cpu_source else 'machine'}",
        )
    return None, "CPU"


def target_workers(sig: RuleInputs) -> int | None:
    """The workers to try for workers that compute: one per CPU, less the training thread's."""
    cpus, _ = _cpus(sig)
    return max(1, int(cpus) - 1) if cpus else None


def more_workers(sig: RuleInputs, loader: dict[str, Any]) -> str:
    """The worker count to try: cores-1 for workers that compute, twice as many for workers
    that wait (remote reads, an API: they cost no CPU, so more of them overlap the waits, even
    past the core count); near the memory limit only after freeing memory."""
    workers = loader.get("num_workers")
    _, where = _cpus(sig)
    full = saturated(sig)
    if full is not None:  # more workers would share CPUs the job already wants in full
        h = sig.host
        wait = f", {h.runq:.1f} of it waiting for a CPU" if h and h.runq else ""
        return (
            f"do not add DataLoader workers (now {workers if workers is not None else '?'}): "
            f"the job already wants {full:.1f} of the {where}'s CPUs{wait}; make each batch "
            "cheaper, or use fewer threads per process (torch.set_num_threads, OMP_NUM_THREADS)"
        )
    target = target_workers(sig)
    first = (
        f"DataLoader num_workers={workers} on a {where}: try {target or 'cores-1'}"
        if workers is not None
        else f"DataLoader(num_workers={target or 'cores-1'})"
    )
    if workers and target is not None and target <= workers:  # cores-1 would be fewer
        first = (
            f"DataLoader num_workers={workers} already fills the {where}: more workers would "
            "share the same CPUs; make each batch cheaper to load"
        )
    h = sig.host
    # what the workers want (CPU plus run-queue wait): a starved worker is not a waiting one
    busy = (
        None if h is None else h.workers_demand if h.workers_demand is not None else h.workers_busy
    )
    if workers and busy is not None and busy < WORKERS_WAIT:
        first = (
            f"DataLoader num_workers={workers}: try {2 * workers}; the workers wait rather "
            f"than compute, so more of them overlap the waits even past the {where}"
        )
    if h and h.mem_near:
        # every worker adds memory: near the limit the next one ends in an OOM kill
        first += f" only after freeing memory (working set at {h.mem_share or 0:.0%} of the limit)"
    return first


def _loader_settings(loader: dict[str, Any]) -> tuple[str, ...]:
    """The DataLoader settings every data-input bound suggests: those not on (or not known).
    persistent_workers and prefetch_factor exist only with workers: with num_workers=0 (torch
    refuses prefetch_factor there) they are said as what comes with the first workers."""
    out = []
    workers = loader.get("num_workers")
    if workers == 0:
        out.append("with workers: persistent_workers=True and prefetch_factor=2-4")
    else:
        if loader.get("persistent_workers") is False or not loader:
            out.append("persistent_workers=True (workers survive between epochs)")
        now = f" (now {loader['prefetch_factor']})" if loader.get("prefetch_factor") else ""
        out.append(f"prefetch_factor=3-4 for bursty loading{now}")
    if loader.get("pin_memory") is False or not loader:
        out.append("pin_memory=True with .to(device, non_blocking=True)")
    return tuple(out)


def data_input(sig: RuleInputs, budget: Budget | None) -> tuple[str, ...]:
    loader = _loader(sig)
    if sig.gpu_view:  # NVML alone saw it
        return (
            advice("attach gputop to the job on this GPU (gputop --pid PID): its steps and "
                   "stacks tell waiting for batches from a slow host loop"),
            more_workers(sig, loader),
        )  # fmt: skip
    return (more_workers(sig, loader), *_loader_settings(loader))


SATURATED = 0.9
"""Share of the effective CPUs the job wants (CPU used plus run-queue wait) from which they are
saturated: another worker would only share the same CPUs."""


def saturated(sig: RuleInputs) -> float | None:
    """The CPU the job wants (cores) when it saturates its effective CPUs, else None."""
    h = sig.host
    if h is None or not h.effective_cpus or h.cpu_cores is None:
        return None
    wants = h.cpu_wanted
    return wants if wants >= SATURATED * h.effective_cpus else None


def cpu_room(sig: RuleInputs) -> tuple[float, float] | None:
    """(CPUs no process of the job wants, the effective CPUs): what a new worker could run on
    without taking a CPU from the job's own threads. None without a CPU reading."""
    h = sig.host
    if h is None or not h.effective_cpus or h.cpu_cores is None:
        return None
    return max(0.0, h.effective_cpus - h.cpu_wanted), h.effective_cpus


def cpu_transform(sig: RuleInputs, budget: Budget | None) -> tuple[str, ...]:
    """Batches that cost CPU to make: the transforms move to the GPU or get cheaper; more
    workers only while CPUs are free (without workers, the first ones). When the job already
    wants every CPU, more workers would share the same CPUs: fewer threads, not more."""
    loader = _loader(sig)
    h = sig.host
    workers = loader.get("num_workers", h.workers if h else None)
    _, where = _cpus(sig)
    full = saturated(sig)
    # what each batch is made of (text, images, reads) is the cause's to say, from the frames
    # (causes/data.py): a lever here names no kind of data the job may not have
    move = "make each batch cheaper to prepare, or move that work to the GPU"
    if full is not None:
        who = f"{workers} workers and the main process" if workers else "the main process"
        first = (
            f"{move}: {who} already {'want' if workers else 'wants'} {full:.1f} of the "
            f"{where}'s CPUs"
        )
        return (first, "do not add DataLoader workers: the CPUs are saturated",
                *_loader_settings(loader))  # fmt: skip
    if workers:
        first = f"{move}; more workers help only up to the {where}"
    else:
        first = more_workers(sig, loader)
    return (first, *_loader_settings(loader))


def data_io(sig: RuleInputs, budget: Budget | None) -> tuple[str, ...]:
    loader = _loader(sig)
    out = ["stage the data on local NVMe; shard many small files into tar/WebDataset"]
    if not loader.get("num_workers"):
        out.append(more_workers(sig, loader))
    return (*out, *_loader_settings(loader))


def h2d_copy(sig: RuleInputs, budget: Budget | None) -> tuple[str, ...]:
    pin = _loader(sig).get("pin_memory")
    return (
        f"pin_memory=True (now {pin}) and .to(device, non_blocking=True): both halves needed",
        "move fewer bytes: uint8 images normalised on the GPU, bf16 inputs",
    )


def comms(sig: RuleInputs, budget: Budget | None) -> tuple[str, ...]:
    """The knobs of the job's own wrapper (read from the live job: ``model/setup.py``), with
    its current values; a wrapper the job does not have is never named. While the agent has
    not said (no agent, an older one), only what holds for any setup."""
    fp = _fingerprint(sig)
    own = wrapper_levers(parallel_kind(fp), lambda name: parallel_setting(fp, name))
    nccl = advice(
        "NCCL_DEBUG=INFO says which transport NCCL chose (NVLink, InfiniBand, or sockets)",
        setups={"nccl"},
    )
    return (
        *own,
        "remove per-step host syncs (.item(), print of tensors) between collectives",
        nccl,
    )


def _ddp(now: Any) -> tuple[str, ...]:
    cap = now("bucket_cap_mb")
    out = []
    if isinstance(cap, int | float):
        out.append(f"DDP bucket_cap_mb={cap:g} -> {2 * cap:g}: fewer, larger all-reduces")
    if now("gradient_as_bucket_view") is False:
        out.append("DDP gradient_as_bucket_view=False -> True: no gradient copy into buckets")
    if now("static_graph") is False and now("find_unused_parameters") is not True:
        out.append("DDP static_graph=False -> True: the same graph each step lets DDP overlap")
    out.append("gradient accumulation under model.no_sync(): all-reduce every N micro-batches")
    return tuple(out)


def _fsdp2(now: Any) -> tuple[str, ...]:
    out = []
    if now("reshard_after_forward") is True:
        out.append("fully_shard(reshard_after_forward=False): no all-gather again in "
                   "backward (parameters stay unsharded until backward: more memory)")  # fmt: skip
    out.append("explicit prefetch: module.set_modules_to_forward_prefetch([next]) and "
               "set_modules_to_backward_prefetch([previous])")  # fmt: skip
    out.append("gradient accumulation: model.set_requires_gradient_sync(False) on all but the "
               "last micro-batch")  # fmt: skip
    if not now("hsdp"):
        out.append("HSDP (a 2-D device mesh: replicate across nodes, shard within one)")
    return tuple(out)


def _fsdp1(now: Any) -> tuple[str, ...]:
    out = []
    strategy = now("sharding_strategy")
    if strategy == "FULL_SHARD":
        out.append("FSDP sharding_strategy=FULL_SHARD -> SHARD_GRAD_OP: no all-gather in "
                   "backward (more memory), or HYBRID_SHARD across nodes")  # fmt: skip
    prefetch = now("backward_prefetch")
    if prefetch != "BACKWARD_PRE":
        out.append(f"FSDP backward_prefetch={prefetch} -> BACKWARD_PRE: the next all-gather "
                   "overlaps the current gradient computation")  # fmt: skip
    if now("forward_prefetch") is False:
        out.append("FSDP forward_prefetch=False -> True (a static graph)")
    return tuple(out)


def _deepspeed(now: Any) -> tuple[str, ...]:
    out = []
    if now("overlap_comm") is False:
        out.append("DeepSpeed zero_optimization.overlap_comm=false -> true")
    size = now("reduce_bucket_size")
    if isinstance(size, int | float):
        out.append(f"DeepSpeed reduce_bucket_size={size:g} -> {2 * size:g}")
    return tuple(out)


def _direct(now: Any) -> tuple[str, ...]:
    return (
        "your loop calls the collectives itself: one all_reduce over a flattened buffer per "
        "step, not one per tensor; async_op=True and wait just before the optimizer",
        "or let DDP do it: buckets overlap the all-reduce with backward",
    )


def _no_wrapper(now: Any) -> tuple[str, ...]:
    return ("gradient accumulation: communicate every N micro-batches",)


_WRAPPER_LEVERS = {DDP: _ddp, FSDP2: _fsdp2, FSDP1: _fsdp1, DEEPSPEED: _deepspeed, DIRECT: _direct}


def wrapper_levers(kind: str | None, now: Callable[[str], Any]) -> tuple[Lever, ...]:
    """The comms levers of the job's own wrapper (``now``: its setting by name), each declared
    a knob of that wrapper (a loop's own collectives: of such a loop); without one, what holds
    for any setup."""
    says = _WRAPPER_LEVERS.get(kind) if kind else None
    if kind is None or says is None:
        return tuple(Lever(x) for x in _no_wrapper(now))
    return tuple(Lever(x, setups={kind}) for x in says(now))


def _count(value: object) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


def cpu_oversubscribed(sig: RuleInputs, budget: Budget | None) -> tuple[str, ...]:
    """Cap the thread pools that are larger than the CPUs left beside the workers; pools
    already at or under that are not asked for a value they have (more processes than CPUs:
    fewer of them, or more CPUs)."""
    cpus, where = _cpus(sig)
    h = sig.host
    omp = h.omp if h else None
    threads = _fingerprint(sig).get("intra_op_threads")
    workers = h.workers if h else 0
    cap = max(1, int(cpus) - workers) if cpus else None
    torch_threads = _count(threads) if threads is not None else None
    settings = {"OMP_NUM_THREADS": _count(omp) if omp else None, "torch threads": torch_threads}
    if torch_threads is not None and not omp:
        del settings["OMP_NUM_THREADS"]  # torch sizes its own pool; it is what runs here
    over = {k: v for k, v in settings.items() if v is None or cap is None or v > cap}
    dont = "do not add DataLoader workers: they compete for the same CPUs"
    if cap is not None and not over:  # the pools are small already: processes fill the CPUs
        n = h.processes if h and h.processes else workers + 1
        return (
            f"{n} processes of the job share a {where}, their thread pools already at most "
            f"{cap}: fewer processes per machine (ranks, DataLoader workers), or more CPUs",
            dont,
        )
    now = ", ".join(f"{k} {'unset' if v is None else v}" for k, v in over.items())
    return (
        f"{now} on a {where}: cap them at {cap or 'the quota'} "
        "(OMP_NUM_THREADS, torch.set_num_threads)",
        dont,
    )


def throttled_power(sig: RuleInputs, budget: Budget | None) -> tuple[str, ...]:
    return (
        advice("the power limit is the cap: check `nvidia-smi -q -d POWER` and ask the "
               "provider"),
        advice("timings from a throttled card are not comparable with others"),
    )  # fmt: skip


def throttled_thermal(sig: RuleInputs, budget: Budget | None) -> tuple[str, ...]:
    return (
        advice("check cooling: fans, airflow, dust; tell the provider"),
        advice("timings from a hot card are not comparable"),
    )


SYNC_LEVER = "remove per-step syncs (.item(), .cpu(), .tolist(), printing tensors)"


def host_overhead(sig: RuleInputs, budget: Budget | None) -> tuple[str, ...]:
    """When the loop's own Python is the cost (``rules.loop_share``), moving it off the step
    comes first, naming the functions the stacks saw; tiny kernels get CUDA graphs and a larger
    batch."""
    if rules.loop_share(sig) is not None or (
        budget is not None and budget.share(slices.LOOP) >= FLOOR
    ):
        own = sig.stacks.own_code if sig.stacks is not None else None
        at = own.at if own is not None else ()
        where = ", ".join(f"{f.name} ({rules.at(f)})" for f, _ in at) or "the per-step work"
        return (
            f"run {where} every N steps, or hand it to a background thread",
            SYNC_LEVER,
            "a larger batch: the same per-step cost over more samples",
        )
    return (
        SYNC_LEVER,
        'torch.compile(mode="reduce-overhead") (CUDA graphs)',
        "a larger batch: fewer, bigger kernels",
    )


CHECKPOINT_LEVER = Lever(
    "checkpoint less often or asynchronously (torch.distributed.checkpoint.async_save)",
    saves=slices.CHECKPOINT,
)
LOG_LEVER = Lever(
    "log every N steps, not every step; keep the metrics on the GPU between logs (each .item() "
    "waits for the GPU)",
    saves=slices.LOG,
)
"""Logging's own lever (the collector's are ``GC_LEVERS``, offered where GC is measured)."""
GC_THRESHOLD = Lever(
    "gc.set_threshold(50_000, 20, 20) once after setup (the default is 700, 10, 10): the "
    "collector runs far less often",
    saves=slices.GC,
)
MANUAL_EVERY = 100
"""Steps between the manual collections the gc.disable() lever asks for."""
GC_LEVERS = (
    GC_THRESHOLD,
    Lever(f"gc.disable() with a manual gc.collect() every {MANUAL_EVERY} steps (e.g. at a "
          "logging step)", saves=slices.GC),
    Lever("fewer long-lived Python containers: arrays or tensors in place of lists and dicts",
          saves=slices.GC),
)  # fmt: skip
"""Cheapest first, by what each saved in tests/bench/bench_gc_levers.py (docs/facts/bounds.md,
"GC levers"); each is sized from the agent's timings of the collections (causes/garbage.py)."""
SIDE_NOTICED = 0.05
"""Share of the step in checkpoint/logging from which its lever follows the GC levers."""


SIDE_LEVERS: dict[str, tuple[Lever, ...]] = {
    slices.EVAL: (
        Lever("evaluate less often (every N steps or once an epoch) or on a fixed subset",
              saves=slices.EVAL),
        Lever("evaluate under torch.inference_mode() with a larger batch than training's",
              saves=slices.EVAL, removes=0.0),
    ),
    slices.CHECKPOINT: (CHECKPOINT_LEVER,),
    slices.LOG: (
        LOG_LEVER,
        Lever("hand logging to a background thread or process", saves=slices.LOG,
              removes=1.0, condition="if logging left the training thread"),
    ),
    slices.GC: GC_LEVERS,
}  # fmt: skip
"""The side work's levers by the slice each would shrink."""


def _twice(value: object) -> str | None:
    """A positive interval doubled ("50 -> 100"), or None for anything else."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return f"{value:g} -> {2 * value:g}"


def framework_side(fp: Any, name: str) -> tuple[Lever, ...]:
    """The framework's own setting for a side slice, with its value now and the next one:
    the interval doubled (what ``saving.REMOVES`` sizes: half the side work)."""
    fw = fp.get("framework") if isinstance(fp, Mapping) else None
    if not isinstance(fw, Mapping):  # the wire is untrusted: a section or nothing
        return ()
    kind = fw.get("kind")
    return tuple(Lever(x, saves=name, setups={str(kind)}) for x in _framework_says(fw, kind, name))


def _framework_says(fw: Mapping[str, Any], kind: object, name: str) -> tuple[str, ...]:
    if kind == LIGHTNING:
        now = {k: fw.get(k) for k in ("val_check_interval", "check_val_every_n_epoch",
                                      "log_every_n_steps")}  # fmt: skip
        if name == slices.EVAL:
            step = now["val_check_interval"]
            if isinstance(step, int) and not isinstance(step, bool) and step > 1:
                return (f"Trainer(val_check_interval={_twice(step)}): validate half as often",)
            epochs = _twice(now["check_val_every_n_epoch"])
            if epochs:
                return (f"Trainer(check_val_every_n_epoch={epochs}), or limit_val_batches "
                        "to a fixed subset: validate half as often",)  # fmt: skip
        if name == slices.LOG and _twice(now["log_every_n_steps"]):
            return (f"Trainer(log_every_n_steps={_twice(now['log_every_n_steps'])})",)
    if kind == TRANSFORMERS:
        setting = {slices.EVAL: "eval_steps", slices.LOG: "logging_steps",
                   slices.CHECKPOINT: "save_steps"}.get(name)  # fmt: skip
        if setting and _twice(fw.get(setting)):
            return (f"TrainingArguments({setting}={_twice(fw.get(setting))}): half as often",)
    return ()


def side_work(sig: RuleInputs, budget: Budget | None) -> tuple[str, ...]:
    """With a budget, each side slice's levers in the order of the time it takes (a slice under
    SIDE_NOTICED gets none: no lever asks to checkpoint less when nothing is saved). Without
    one, garbage collection's levers first when measured GC pauses outweigh the other side
    work (the excess of the spikes attributed to it, or its share against checkpoint/logging)."""
    if budget is not None:
        present = sorted(
            (s for s in budget.slices if s.name in slices.SIDE and s.share >= SIDE_NOTICED),
            key=lambda s: -s.share,
        )
        if present:
            fp = _fingerprint(sig)
            return tuple(
                lever
                for s in present
                for lever in (*framework_side(fp, s.name), *SIDE_LEVERS[s.name])
            )
    st = sig.steps
    if st is None:
        return (CHECKPOINT_LEVER, LOG_LEVER)
    med = st.spike_median_ms or st.median_ms
    gc_ms = sum(s.ms - med for s in st.spikes if s.grew.startswith("gc"))
    other_ms = sum(s.ms - med for s in st.spikes if not s.grew.startswith("gc"))
    side = sum(st.shares.get(p, 0.0) for p in step.SIDE_PHASES)
    gc_share = st.gc_share or 0.0
    if (gc_ms and gc_ms >= other_ms) or (gc_share > SIDE_SHARE and gc_share >= side):
        out = list(GC_LEVERS)
        grown = {s.grew for s in st.spikes}
        if side > SIDE_NOTICED or grown & set(step.SIDE_PHASES):
            out.append(CHECKPOINT_LEVER)
        return tuple(out)
    return (CHECKPOINT_LEVER, LOG_LEVER)


def straggler(sig: RuleInputs, budget: Budget | None) -> tuple[str, ...]:
    return (
        advice("look at that rank: throttling or ECC on its GPU, data skew, NUMA placement"),
        Lever("bind each rank to its GPU's NUMA node", saves=slices.STRAGGLER, removes=0.0),
    )


def hung(sig: RuleInputs, budget: Budget | None) -> tuple[str, ...]:
    """Where to look first depends on where the job is stuck: a loader no worker feeds, ranks
    in a collective, or one process blocked on its own lock, queue, pipe or child."""
    still = sig.stacks.still if sig.stacks else ()
    waits = {m.phase for m in still}
    if stack.DATA_WAIT in waits:
        return (  # the main thread waits for a batch no worker will send
            advice("`gputop` key d (or py-spy dump) on the DataLoader workers: where they block"),
            "DataLoader(timeout=...) turns a stuck worker into an error instead of a hang",
            advice("check the storage the workers read (a dead mount blocks reads for good)"),
        )
    ranks = any(m.rank is not None for m in still) or (sig.steps and sig.steps.ranks > 1)
    if ranks or stack.COLLECTIVE_WAIT in waits:
        recorder = advice("NCCL flight recorder: TORCH_NCCL_TRACE_BUFFER_SIZE=2000, "
                          "TORCH_NCCL_DUMP_ON_TIMEOUT=1", setups={"nccl"})  # fmt: skip
        return (
            advice("`gputop` key d (or py-spy dump) on every rank"),
            recorder,
            "set collective timeouts (init_process_group(timeout=...)) so a hang fails fast",
        )
    return (
        advice(
            "`gputop` key d (or py-spy dump) shows every thread: the one holding the lock, "
            "or the one that should feed the queue, is among them"
        ),
        advice(
            "py-spy dump --native shows the C call a blocked thread sits in (a pipe, a "
            "socket, a child process)"
        ),
        "a timeout on the wait (queue.get, lock.acquire, subprocess.run, socket.settimeout) "
        "turns a hang into an error with a traceback",
    )


def host_memory_pressure(sig: RuleInputs, budget: Budget | None) -> tuple[str, ...]:
    loader = _loader(sig)
    workers = loader.get("num_workers", sig.host.workers if sig.host else None)
    if not workers:  # no worker copies anything: what grows is the process's own memory
        grows = sig.host.grower if sig.host else None
        who = f" (pid {grows.pid}, {grows.role})" if grows is not None else ""
        return (
            f"cap what the training process keeps{who}: a replay buffer or cache to a fixed "
            "size, losses and metrics kept as numbers (.item()) or detached, not as tensors "
            "that hold their graph",
            advice("a memory profile shows what holds it: `gputop` key m (a memory capture)"),
            f"raise the limit, or keep the working set under {MEM_NEAR:.0%} of it",
        )
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


def memory_bandwidth(sig: RuleInputs, budget: Budget | None) -> tuple[str, ...]:
    return (
        "fuse kernels: torch.compile",
        "fused attention (scaled_dot_product_attention)",
        "bf16 halves the bytes; avoid transposes and copies",
    )


def gpu_compute(sig: RuleInputs, budget: Budget | None) -> tuple[str, ...]:
    fp = _fingerprint(sig)
    precision = fp.get("float32_matmul_precision")
    out = []
    if precision == "highest":
        out.append('TF32: torch.set_float32_matmul_precision("high") (now "highest")')
    if not fp.get("autocast"):
        out.append("bf16 autocast")
    out += [
        "SDPA / flash attention",
        "torch.compile" if not fp.get("compiled") else "torch.compile is on: check graph breaks",
        "a larger micro-batch up to the memory wall",
    ]
    return tuple(out)


def idle(sig: RuleInputs, budget: Budget | None) -> tuple[str, ...]:
    """Nothing to speed up: nothing is training."""
    return ()
