"""The corpus's table: each scenario's script and arguments, how it is launched, and what is
right for it (the bounds, the cause, the budget it is built to have, the risk, what no lever
may name). The verdict bench (tests/bench/bench_verdicts.py), the lever-savings bench and the
scenario tests read it from here; README.md's table says the same in prose."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CORPUS = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Scenario:
    """A corpus script, how it is launched, and the bounds that are right for it."""

    name: str
    argv: tuple[str, ...]
    launcher: str
    expected: frozenset[str]
    why: str = ""
    """Why the expected bounds are right, when that is not plain from the script's name."""
    onset: float = 0.0
    """Seconds after the script starts when the cause the scenario is about begins (a hang after
    --stuck-after, a one-off checkpoint, training after a long warm-up); 0 from the start."""
    never: frozenset[str] = frozenset()
    """Bounds that are wrong at any moment of the run (a slow job called hung)."""
    shares: tuple[tuple[str, float], ...] = ()
    """The step-time budget the script is built to have (slice, share of wall time): the
    bench prints the measured share beside each, with the error in points."""
    cause: str = ""
    """Words the final principal's cause line must hold: the cause the script is built with
    ("inputs are" for a rank given longer sequences); empty where no cause is stated."""
    cause_of: str = ""
    """The bound whose finding must carry ``cause`` when it need not be the principal (a
    straggler beside a comms wait of about its size); empty: the principal."""
    foreign: tuple[str, ...] = ()
    """Words no lever of that finding may hold: a kind of data the job does not have
    ("image" for a text loader)."""
    memory_mib: int = 0
    """Run the job in a memory cgroup of this limit (MiB), as a container would: 0, none."""
    risk: str = ""
    """Words one of the verdict's risk lines must hold at the end; empty where none is built."""
    alike: tuple[tuple[str, ...], ...] = ()
    """Slices the job's own clocks are compared with as one, where the scenario's why says
    either name is right (its metrics logging is also the loop's own Python)."""


def mixed(name: str, expected: str, launcher: str = "plain", why: str = "", cause: str = "",
          **shares: float) -> Scenario:  # fmt: skip
    """A mixed scenario: tests/corpus/mixed_loop.py (one process) or mixed_ranks.py (two gloo
    ranks) with costs at the stated shares; the flags are the slices' (logging for log).
    ``unmarked``: compute no hook marks (mixed_loop's weight average), stated as no slice
    of its own (it is compute, beside the hooked compute)."""
    script = "mixed_loop.py" if launcher == "plain" else "mixed_ranks.py"
    argv = [script, *(["--spawn"] if launcher == "torch.multiprocessing.spawn" else [])]
    for slice_, share in shares.items():
        argv += [f"--{'logging' if slice_ == 'log' else 'sync' if slice_ == 'comms' else slice_}",
                 str(share)]  # fmt: skip
    stated = {k: v for k, v in shares.items() if k != "unmarked"}
    return Scenario(name, tuple(argv), launcher, frozenset({expected}), why,
                    shares=tuple(stated.items()), cause=cause)  # fmt: skip


HUNG = frozenset({"hung"})

SCENARIOS = (
    Scenario("healthy_mlp", ("healthy_mlp.py",), "plain", frozenset({"gpu-compute"})),
    Scenario(
        "transform_in_loop",
        ("transform_in_loop.py",),
        "plain",
        frozenset({"data-input/cpu-transform"}),
    ),
    Scenario("remote_reads", ("remote_reads.py",), "DataLoader workers", frozenset({"data-input"})),
    Scenario(
        "frequent_checkpoints", ("frequent_checkpoints.py",), "plain", frozenset({"side-work"})
    ),
    Scenario(
        "stuck_on_lock",
        ("stuck_on_lock.py", "--stuck-after", "8"),
        "plain",
        HUNG,
        "a helper thread took the lock and ended: the main thread waits in futex, alone",
        onset=8,
        cause="no thread of its process will release",
    ),
    Scenario("ddp_healthy", ("ddp_healthy.py",), "torchrun", frozenset({"gpu-compute"})),
    Scenario(
        "ddp_rank_stalls",
        ("ddp_rank_stalls.py", "--stall-after", "8"),
        "torchrun",
        HUNG,
        onset=8,
        cause="no other thread of its process is left",
    ),
    Scenario("eval_every_n", ("eval_every_n.py",), "plain", frozenset({"side-work"})),
    Scenario(
        "spawn_straggler",
        ("spawn_straggler.py",),
        "torch.multiprocessing.spawn",
        frozenset({"straggler"}),
        "rank 1's extra work is a Python busy loop before the forward, outside every phase",
        cause="the loop's own Python",
    ),
    # hangs of several kinds, each after --stuck-after seconds of ordinary steps
    Scenario(
        "hang_file_lock",
        ("hang_file_lock.py", "--stuck-after", "8"),
        "plain",
        HUNG,
        "the main thread blocks in flock on a lock a detached cache warmer (outside the job) "
        "took and keeps",
        onset=8,
        cause="held by pid",
    ),
    Scenario(
        "hang_dead_producer",
        ("hang_dead_producer.py", "--stuck-after", "8"),
        "plain",
        HUNG,
        onset=8,
        cause="no other thread of its process is left",
    ),
    Scenario(
        "hang_pipe_dead_writer",
        ("hang_pipe_dead_writer.py", "--stuck-after", "8"),
        "plain",
        HUNG,
        "the preprocessor writing to the pipe died; the trainer kept a write end, so its read "
        "never sees end-of-file",
        onset=8,
        cause="no other process holds its write end",
    ),
    Scenario(
        "hang_preprocess_subprocess",
        ("hang_preprocess_subprocess.py", "--stuck-after", "8"),
        "plain",
        HUNG,
        "the main thread waits for a child process that sleeps: nothing in the tree works and "
        "no step will complete",
        onset=8,
        cause="waits for its child",
    ),
    Scenario(
        "hang_socket_recv",
        ("hang_socket_recv.py", "--stuck-after", "8"),
        "plain",
        HUNG,
        "the main thread reads a socket whose other end is a thread of the same process, parked "
        "in Event.wait",
        onset=8,
        cause="parked too: Thread-1 (label_server)",
    ),
    Scenario(
        "hang_tcp_label_server",
        ("hang_tcp_label_server.py", "--stuck-after", "8"),
        "plain",
        HUNG,
        "the main thread reads a TCP socket whose other end is a label service the job started, "
        "which stopped answering",
        onset=8,
        cause="waits for an answer from pid",
    ),
    Scenario(
        "hang_unix_embed_server",
        ("hang_unix_embed_server.py", "--stuck-after", "8"),
        "plain",
        HUNG,
        "the main thread reads a Unix socket whose other end is an embedding server the job "
        "started, which stopped answering",
        onset=8,
        cause="over a Unix socket",
    ),
    Scenario(
        "hang_abba_deadlock",
        ("hang_abba_deadlock.py", "--stuck-after", "8"),
        "plain",
        HUNG,
        onset=8,
        cause="lock-order deadlock",
    ),
    Scenario(
        "hang_loader_workers",
        ("hang_loader_workers.py", "--stuck-after", "8"),
        "DataLoader workers",
        HUNG,
        "the main process waits in the DataLoader, which looks like data-input, but every worker "
        "is parked in Event.wait with no CPU: no batch will ever come, so it is a hang, not slow "
        "input",
        onset=8,
        cause="every DataLoader worker (2) waits in",
    ),
    Scenario(
        "hang_spawn_rank_waits",
        ("hang_spawn_rank_waits.py", "--stuck-after", "8"),
        "torch.multiprocessing.spawn",
        HUNG,
        onset=8,
        cause="no other thread of its process is left",
    ),
    Scenario(
        "hang_torchrun_barrier",
        ("hang_torchrun_barrier.py", "--stuck-after", "8"),
        "torchrun",
        HUNG,
        "the lock is taken at 8 s and rank 1 reaches it at the next epoch end (50 steps, 1-3 s "
        "later), so the hang starts a little after the onset",
        onset=8,
        cause="parked too",
    ),
    # slow but never stuck
    Scenario(
        "long_checkpoint",
        ("long_checkpoint.py", "--checkpoint-at", "10"),
        "plain",
        frozenset({"side-work", "gpu-compute"}),
        "one torch.save of ~15 s of pickling from 10 s on: side-work while it is in the step "
        "window, compute once it has scrolled out (which of the two is shown at the end depends "
        "on the window); hung is wrong: the process is at 100% CPU in the pickler",
        onset=10,
        never=HUNG,
    ),
    Scenario(
        "long_eval",
        ("long_eval.py",),
        "plain",
        frozenset({"side-work"}),
        "10+ s of evaluation after every ~4 s of training: periodic work that is not training; "
        "the steps stop for 10 s at a time but the process computes throughout, so hung is wrong. "
        "The first eval pass starts after 150 steps (~5 s): the onset",
        onset=5,
        never=HUNG,
    ),
    Scenario(
        "slow_steps",
        ("slow_steps.py",),
        "plain",
        frozenset({"gpu-compute"}),
        "4-6 s steps of matmuls: few steps, all compute; hung is wrong",
        never=HUNG,
    ),
    Scenario(
        "slow_warmup",
        ("slow_warmup.py",),
        "plain",
        frozenset({"gpu-compute"}),
        "~12-15 s of pure-Python dataset building before the first step, then a healthy loop; "
        "hung is wrong during the warm-up too (no step yet, 100% CPU)",
        onset=13,
        never=HUNG,
    ),
    # healthy
    Scenario("cnn_workers", ("cnn_workers.py",), "DataLoader workers", frozenset({"gpu-compute"})),
    Scenario(
        "replay_buffer_growth",
        ("replay_buffer_growth.py",),
        "plain",
        frozenset({"gpu-compute"}),
        "a healthy step (its sleep is the environment's turn, outside every phase) while a "
        "replay buffer grows ~8 MiB/s in a 2 GiB cgroup: nothing is slow, the risk is the OOM "
        "kill, said beside the verdict",
        memory_mib=2048,
        risk="MiB/min: the limit in",
    ),
    Scenario(
        "transformer_eval",
        ("transformer_eval.py",),
        "plain",
        frozenset({"gpu-compute"}),
        "the evaluation every 100 steps is ~3% of the time: below what side-work is for",
    ),
    Scenario(
        "spawn_ddp_healthy",
        ("spawn_ddp_healthy.py",),
        "torch.multiprocessing.spawn",
        frozenset({"gpu-compute"}),
    ),
    # side work
    Scenario(
        "heavy_logging",
        ("heavy_logging.py",),
        "plain",
        frozenset({"side-work", "host-overhead"}),
        "about half of each step is metrics logging (side work by what it is), but it happens "
        "every step rather than as spikes, and it is made of per-tensor .item()/.tolist() host "
        "syncs, which docs/facts/bounds.md lists under host-overhead",
        alike=(("log", "loop"),),
    ),
    Scenario("gc_pressure", ("gc_pressure.py",), "plain", frozenset({"side-work"})),
    # data input
    Scenario(
        "aug_workers",
        ("aug_workers.py",),
        "DataLoader workers",
        frozenset({"data-input/cpu-transform", "cpu-oversubscribed"}),
        "two workers pegged by augmentation is data-input/cpu-transform; but the trainer keeps "
        "torch's default intra-op pool (2 threads) next to two busy workers on 2 cores, and on "
        "a loaded machine the step then stretches in compute, not in the batch wait (measured "
        "here: 5-9% wait, 110-130 ms steps against 3-30 ms alone): more runnable threads than "
        "cores, which is cpu-oversubscribed",
    ),
    Scenario(
        "tokenize_in_getitem",
        ("tokenize_in_getitem.py",),
        "plain",
        frozenset({"data-input/cpu-transform"}),
    ),
    Scenario(
        "many_small_files",
        ("many_small_files.py",),
        "DataLoader workers",
        frozenset({"data-input", "data-input/io"}),
        "16 small files per item read by two workers; on this machine they come from the page "
        "cache, so the workers are busy in open/read/close rather than waiting on a device: "
        "data-input is right, /io is what it is built to be (the lever is sharding the files), "
        "cpu-transform would point at a transform that does not exist",
    ),
    Scenario(
        "oversubscribed_threads",
        ("oversubscribed_threads.py",),
        "DataLoader workers",
        frozenset({"cpu-oversubscribed"}),
    ),
    # several ranks
    Scenario(
        "torchrun_straggler",
        ("torchrun_straggler.py",),
        "torchrun",
        frozenset({"straggler"}),
        "rank 1's sequences are twice as long: its inputs, then its compute",
        cause="inputs are 2.0x",
    ),
    Scenario(
        "straggler_cpu_shared",
        ("straggler_cpu_shared.py",),
        "torchrun",
        frozenset({"straggler"}),
        "a daemon outside the job burns rank 1's only CPU: same inputs, its threads wait",
        cause="CPUs are shared",
    ),
    # a swapped pair: two straggler causes at once, each leading in one of them
    Scenario(
        "straggler_cpu_over_inputs",
        ("straggler_two_causes.py", "--rows-x", "1.3", "--ship-duty", "1.0"),
        "torchrun",
        frozenset({"straggler"}),
        "rank 1 has 1.3x the rows and a daemon burning its only CPU (about 2x): the CPU leads",
        cause="CPUs are shared",
    ),
    Scenario(
        "straggler_inputs_over_cpu",
        ("straggler_two_causes.py", "--rows-x", "2.5", "--ship-duty", "0.4"),
        "torchrun",
        frozenset({"straggler"}),
        "rank 1 has 2.5x the rows and a daemon taking 40% of its CPU (about 1.3x): the inputs lead",
        cause="inputs are 2.5x",
    ),
    Scenario(
        "straggler_gc",
        ("straggler_gc.py",),
        "torchrun",
        frozenset({"straggler"}),
        "rank 1 alone churns a 400k-record Python cache: full collections on rank 1 only",
        cause="garbage collection",
    ),
    Scenario(
        "hang_chain_lock",
        ("hang_chain_lock.py", "--stuck-after", "8"),
        "plain",
        frozenset({"hung"}),
        "the trainer reads labels over a pipe from its preprocessor, which blocks on a file "
        "lock a detached cache warmer (outside the job) keeps: the chain goes two links deep",
        onset=8,
        cause="outside the job, which keeps it",
    ),
    Scenario(
        "hang_pipe_cycle",
        ("hang_pipe_cycle.py", "--stuck-after", "8"),
        "plain",
        frozenset({"hung"}),
        "the trainer waits for a score its helper will send after a handshake the trainer "
        "never sends: two processes each reading a pipe only the other writes",
        onset=8,
        cause="a deadlock: pid",
    ),
    Scenario(
        "rank_without_workers",
        ("rank_without_workers.py",),
        "torchrun",
        frozenset({"comms", "straggler"}),
        "a per-rank config left rank 1 with num_workers=0: it tokenises each batch on its "
        "training thread and rank 0 waits for it; the straggler wait and the all-reduce's own "
        "wait are about one size, so either may lead, and the straggler names its cause",
        cause="rank 1 prepares its batches on its training thread (num_workers=0",
        cause_of="straggler",
    ),
    Scenario(
        "text_workers",
        ("text_workers.py",),
        "DataLoader workers",
        frozenset({"data-input/cpu-transform", "data-input"}),
        "two workers normalise, unescape and tokenise raw text in Python (re, unicodedata, "
        "html) on every access: there are no images",
        cause="text normalising and tokenising",
        foreign=("image", "decode", "augment", "DALI", "kornia"),
    ),
    Scenario(
        "epoch_restart",
        ("epoch_restart.py",),
        "DataLoader workers",
        frozenset({"data-input", "data-input/cpu-transform", "data-input/io"}),
        "short epochs; each starts two new workers (persistent_workers=False) that load a "
        "400k-entry index in worker_init_fn before the first batch: one long pause per epoch",
        cause="persistent_workers=False",
        foreign=("image", "decode", "tokeni"),
    ),
    # several costs at once, each pair with its sizes swapped: the verdict follows the larger
    mixed("mixed_ckpt35_wait12", "side-work", checkpoint=0.35, data=0.12),
    mixed("mixed_ckpt8_wait45", "data-input", checkpoint=0.08, data=0.45),
    mixed(
        "mixed_eval60_wait10",
        "side-work",
        eval=0.60,
        data=0.10,
        why="a long validation pass with a small training batch wait (Lightning's case)",
    ),
    mixed("mixed_eval10_wait40", "data-input", eval=0.10, data=0.40),
    mixed(
        "mixed_gc40_loop30",
        "side-work",
        gc=0.40,
        loop=0.30,
        why="full collections over a large live heap beside per-step bookkeeping",
    ),
    mixed("mixed_gc12_loop45", "host-overhead", gc=0.12, loop=0.45),
    mixed("mixed_wait30_loop12", "data-input", data=0.30, loop=0.12),
    mixed(
        "mixed_unmarked30_loop5",
        "gpu-compute",
        unmarked=0.30,
        loop=0.05,
        why="a weight average by hand with torch ops: compute no hook marks, not the loop",
    ),
    mixed("mixed_unmarked5_loop30", "host-overhead", unmarked=0.05, loop=0.30),
    mixed("mixed_wait10_loop35", "host-overhead", data=0.10, loop=0.35),
    mixed(
        "mixed_log30_wait12",
        "side-work",
        log=0.30,
        data=0.12,
        why="a slow logging handler every step: the stacks name it inside the agent's "
        "unmarked time",
    ),
    mixed("mixed_log10_wait35", "data-input", log=0.10, data=0.35),
    mixed(
        "mixed_small_eval",
        "gpu-compute",
        eval=0.04,
        why="an eval pass of 4% of the time (nanoGPT's): no loss reaches the floor",
    ),
    mixed(
        "mixed_sync30_log10",
        "comms",
        "torchrun",
        cause="the loop's own collectives",
        comms=0.30,
        log=0.10,
    ),
    mixed("mixed_sync10_log40", "side-work", "torchrun", comms=0.10, log=0.40),
    mixed(
        "mixed_straggler25_ckpt10",
        "straggler",
        "torch.multiprocessing.spawn",
        straggler=0.25,
        checkpoint=0.10,
        why="rank 1 works 25% longer; rank 0's wait for it is a little less (rank 0 has "
        "work of its own in the meantime)",
        cause="the loop's own Python",
    ),
    mixed(
        "mixed_straggler10_ckpt30",
        "side-work",
        "torch.multiprocessing.spawn",
        straggler=0.10,
        checkpoint=0.30,
    ),
    # the frameworks people train with (the `frameworks` test extra)
    Scenario(
        "lightning_val",
        ("lightning_val.py",),
        "Lightning Trainer",
        frozenset({"side-work"}),
        "Lightning's validation loop over a set four times the training epoch, every epoch: "
        "about 55-60% of wall time, beside a one-worker training loader",
        shares=(("eval", 0.57),),
    ),
    Scenario(
        "hf_trainer",
        ("hf_trainer.py",),
        "transformers Trainer",
        frozenset({"gpu-compute"}),
        "a small BERT fine-tuned by the Trainer: forward and backward are the step",
    ),
    Scenario(
        "accelerate_ddp",
        ("accelerate_ddp.py",),
        "accelerate launch",
        frozenset({"gpu-compute"}),
        "two gloo ranks under accelerate launch --multi_gpu with Accelerator(cpu=True)",
    ),
    Scenario(
        "ddp_big_grad",
        ("ddp_big_grad.py",),
        "torchrun",
        frozenset({"comms"}),
        "a 256 MB dense gradient all-reduced over gloo each step: ~70% of the step here (the "
        "rest is the optimizer over 64M parameters)",
        cause="DDP all-reduces its gradients",
    ),
    Scenario(
        "fsdp_comms",
        ("fsdp_comms.py",),
        "torchrun",
        frozenset({"comms"}),
        "FSDP2 over gloo: six 4 MB layers gathered for each forward and backward, a batch of 8",
        cause="FSDP2 gathers its parameters",
    ),
)


def by_name(name: str) -> Scenario:
    for s in SCENARIOS:
        if s.name == name:
            return s
    raise KeyError(name)
