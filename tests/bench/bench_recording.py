"""Size of a session recording per hour, and the time `gputop report` takes on a day-long one.

The readings go through gputop's own ``Session`` (gputop/session.py), as the live TUI's do:
every reading is appended to the Timeline and given to the recorder, then the verdict is
evaluated at the point the readings define and handed to ``Recorder.verdict``. The
readings come at the TUI's default rates: GPUs and host every 2 s (Config.interval), agents and
py-spy stacks every 1 s. A fake monotonic clock (``Recorder(path, clock=...)``) makes an hour
take seconds.

- GPUs: 8 simulated H100s ("mixed" scenario) below the real pynvml. The board is built on the
  fake clock (``SimBoard(clock=...)`` + ``installed``: ``start_simulated_board`` would tie its
  physics to time.monotonic, so an hour of samples would all show the same few seconds), and
  ``NvmlSource.open(clock=..., wall=...)`` stamps ``GpuSample.t`` (which comes from the
  source's own clock, not the board's) with the fake time. A reading costs ~5 ms; the
  day-long file reads the board over its first 10 minutes only, then those readings again in a
  loop (t, wall and the energy counters moved on).
- Host: a trainer with a ~40-thread main process and 4 DataLoader workers, a cgroup v2 with
  PSI; per-thread values change on host.py's 3 s tier, memory on its 30 s tier; rates and CPU
  shares are counter deltas over the interval (full-precision floats, 0.0 for idle threads).
- Agents: rank 0, N steps/s with 6 phases (ns, jittered), GPU phase times arriving one reading
  late, GC time, the last 512 steps (STEP_HISTORY) in every reading.
- Stacks: the main process's 8 Python threads (20-40 frames; the main thread moves between
  phases, the others rarely change) and one DataLoader worker dumped in turn (the others keep
  their last dump, as StackSource does).
- Verdicts: evaluated for real over the whole size run (~2 ms each); the other step rates
  hand the recorder the same verdicts again in order, and the day-long file evaluates for real
  over its first 10 minutes, then reuses those (260,000 evaluations would take ~10 minutes).

The day-long file is written by a second process while the first runs the other step rates
(the recorder's own work, ~7 s per simulated hour, makes it take ~3 minutes).

Targets: under 5 MB per hour of recording (8 GPUs, one trainer, default interval), and
`gputop report` under 5 s on a 24-hour recording.

    python tests/bench/bench_recording.py [--hours 1] [--report-hours 24] [--steps-per-s 5]
                                          [--keep DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from types import MappingProxyType as M
from typing import Any

from gputop.config import Config
from gputop.model import GpuSample
from gputop.model.host import CgroupSample, HostSample, ProcSample, ThreadInfo
from gputop.model.stacks import Frame, ProcessStacks, StacksSample, ThreadStack
from gputop.model.steps import AgentsSample, AgentState, StepRecord
from gputop.record.fileformat import DATA, FRAME, HEADER, MAGIC, NEW_STREAM, SUMMARY, Scan, frames
from gputop.record.reader import open_recording
from gputop.record.report import build_report, render_report
from gputop.record.writer import Recorder
from gputop.session import Session
from gputop.sim import SimBoard, SimProcess, installed
from gputop.sinks import Sinks
from gputop.sources.agent_link import STEP_HISTORY
from gputop.sources.feeds import AGENTS_MAX_PERIOD_S
from gputop.sources.host import SLOW_TIER_S, THREAD_TIER_S
from gputop.sources.nvml import NvmlSource
from gputop.sources.stack_phases import classify
from gputop.vocab.stacks import STACKS_PERIOD_S

INTERVAL_S = Config().interval  # GPU and host samplers
AGENT_S = min(INTERVAL_S, AGENTS_MAX_PERIOD_S)  # the agent sampler: at least every second
STACKS_S = STACKS_PERIOD_S
T0 = 86_400.0 * 3  # the monotonic clock of a machine up for three days
WALL0 = 1.75e9
PID = os.getpid()  # the trainer: NVML lists it on every GPU
MB = 1e6
TARGET_MB_PER_H = 5.0
TARGET_REPORT_S = 5.0
RATES = (1, 5, 20, 50)


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> float:
        return self.t

    def wall(self) -> float:
        return WALL0 + (self.t - T0)


# ---- GPUs -----------------------------------------------------------------------------------


class ReplayGpus:
    """Board readings taken before, in a loop, moved to the fake clock (t, wall; the energy
    counters go on rising)."""

    def __init__(self, clock: Clock, devices: Sequence[Any], taken: list[list[GpuSample]]) -> None:
        self.clock = clock
        self.devices = tuple(devices)
        self.taken = taken
        self.i = 0
        n = len(taken)
        self.energy_lap = [
            ((b.energy_j or 0.0) - (a.energy_j or 0.0)) * n / max(1, n - 1)
            for a, b in zip(taken[0], taken[-1], strict=True)
        ]

    def sample(self) -> list[GpuSample]:
        lap, k = divmod(self.i, len(self.taken))
        self.i += 1
        t, wall = self.clock(), self.clock.wall()
        out = []
        for s, lap_j in zip(self.taken[k], self.energy_lap, strict=True):
            energy = s.energy_j + lap * lap_j if s.energy_j is not None else None
            out.append(dataclasses.replace(s, t=t, wall=wall, energy_j=energy))
        return out

    def close(self) -> None:
        pass


class BoardGpus:
    """The simulated board on the fake clock, read through the real pynvml; after
    ``board_s`` fake seconds (None: never), its readings so far again in a loop."""

    def __init__(self, clock: Clock, seed: int, board_s: float | None = None) -> None:
        self.clock = clock
        self.until = clock() + board_s if board_s is not None else float("inf")
        board = SimBoard("h100x8", scenario="mixed", seed=seed, clock=clock, warmup_s=120.0)
        for d in board.devices:
            d.processes.append(SimProcess(PID, 6 << 30))
        self._ctx: Any = installed(board)
        self._ctx.__enter__()
        self.source: Any = NvmlSource.open(clock=clock, wall=clock.wall)
        self.devices = tuple(self.source.devices)
        self.taken: list[list[GpuSample]] = []
        self.seconds = 0.0
        self.replay: ReplayGpus | None = None

    def sample(self) -> list[GpuSample]:
        if self.replay is None and self.clock() >= self.until:
            self.close()
            self.replay = ReplayGpus(self.clock, self.devices, self.taken)
        if self.replay is not None:
            return self.replay.sample()
        t0 = time.perf_counter()
        out = self.source.sample()
        self.seconds += time.perf_counter() - t0
        self.taken.append(out)
        return out

    def close(self) -> None:
        if self.source is not None:
            self.source.close()
            self._ctx.__exit__(None, None, None)  # pynvml as it was
            self.source = None


# ---- host -----------------------------------------------------------------------------------

CMDLINE = "python train.py --config configs/llama-1b.yaml --batch-size 32 --workers 4"
ENV = M({"OMP_NUM_THREADS": "8", "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7",
         "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1"})  # fmt: skip
MAIN_THREADS = (
    ["python"] + ["python"] * 15 + [f"pt_autograd_{i}" for i in range(8)]
    + ["cuda-EvtHandlr"] * 2 + ["pt_data_pin", "pt_tcpstore_uv", "python", "python"]
    + ["python"] * 10
)  # fmt: skip


class _Proc:
    def __init__(self, pid: int, role: str, names: list[str], cpu: float, rng: random.Random):
        self.pid, self.role, self.cpu, self.rng = pid, role, cpu, rng
        self.tids = [pid] + [pid + 1 + i for i in range(len(names) - 1)]
        self.names = list(names)
        self.next_tid = pid + len(names) + 1
        self.threads: tuple[ThreadInfo, ...] = ()
        self.thread_t: float | None = None
        self.slow_t: float | None = None
        self.rss = (9 << 30) if role == "main" else (3 << 30)
        self.uss = self.pss = None
        self.running = self.disk = 0
        self.ctx: tuple[float | None, float | None] = (None, None)
        self.prev_t: float | None = None
        self.fds = 0

    def sample(self, now: float) -> ProcSample:
        r = self.rng
        if self.thread_t is None or now - self.thread_t >= THREAD_TIER_S:
            dt = now - self.thread_t if self.thread_t is not None else None
            self.thread_t = now
            if self.role == "main" and r.random() < 0.01:  # a thread comes or goes
                if r.random() < 0.5 and len(self.tids) > 30:
                    k = r.randrange(1, len(self.tids))
                    del self.tids[k], self.names[k]
                else:
                    self.tids.append(self.next_tid)
                    self.names.append("python")
                    self.next_tid += 1
            infos = []
            for i, (tid, name) in enumerate(zip(self.tids, self.names, strict=True)):
                # per-thread CPU as host.py computes it: clock ticks (10 ms) over the interval,
                # 0.0 for the many idle threads
                if i == 0 and dt:  # the busy thread: most of a core
                    ticks = r.randrange(int(dt * 70), int(dt * 97))
                elif name.startswith(("pt_autograd", "pt_data", "cuda")):
                    ticks = r.randrange(0, 40)
                else:
                    ticks = r.randrange(0, 3) if r.random() < 0.2 else 0
                cpu = ticks * 0.01 / dt if dt else None
                state = "R" if r.random() < (0.7 if i == 0 else 0.03) else "S"
                infos.append(ThreadInfo(tid, name, state, cpu))
            self.threads = tuple(infos)
            self.running = sum(t.state == "R" for t in infos)
            self.disk = int(r.random() < 0.02)
            if dt:
                self.ctx = (r.randrange(3000, 16000) / dt, r.randrange(40, 1200) / dt)
            self.fds = (180 if self.role == "main" else 40) + r.randrange(0, 8)
        if self.slow_t is None or now - self.slow_t >= SLOW_TIER_S:
            self.slow_t = now
            self.uss = self.rss - r.randrange(1 << 30, 2 << 30) // 4096 * 4096
            self.pss = self.uss + r.randrange(200 << 20, 400 << 20) // 1024 * 1024
        self.rss += r.randrange(-64, 65) * 4096
        dt = now - self.prev_t if self.prev_t is not None else None
        self.prev_t = now

        def rate(per_s: float) -> float | None:  # a counter's delta over the interval
            return int(per_s * dt * r.uniform(0.8, 1.2)) / dt if dt else None

        return ProcSample(
            pid=self.pid, start_ticks=123_456_789 + self.pid, ppid=1 if self.role == "main"
            else PID, name="python" if self.role == "main" else "pt_data_worker",
            cmdline=CMDLINE, role=self.role, state="R" if self.running else "S",
            cpu_cores=int(self.cpu * dt * r.uniform(85, 115)) * 0.01 / dt
            if dt else None, rss_bytes=self.rss, uss_bytes=self.uss, pss_bytes=self.pss,
            num_threads=len(self.tids), threads_running=self.running, threads_disk_wait=self.disk,
            threads=self.threads, runq_wait=r.randrange(0, 4 * 10**8) / 1e9 / dt if dt else None,
            ctx_voluntary_rate=self.ctx[0], ctx_involuntary_rate=self.ctx[1],
            read_chars_rate=rate(40e6), read_bytes_rate=rate(1e6) if r.random() < 0.3 else 0.0,
            write_bytes_rate=rate(1e5) if r.random() < 0.1 else 0.0, open_fds=self.fds,
        )  # fmt: skip


class HostGen:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.procs = [_Proc(PID, "main", MAIN_THREADS, 1.4, rng)] + [
            _Proc(PID + 1000 + 10 * w, "worker", ["pt_data_worker", "python", "python"], 0.9, rng)
            for w in range(4)
        ]
        self.events = M({"low": 0, "high": 0, "max": 0, "oom": 0, "oom_kill": 0})

    def sample(self, t: float, wall: float) -> HostSample:
        r = self.rng
        procs = tuple(p.sample(t) for p in self.procs)
        use = sum(p.cpu_cores or 0.0 for p in procs)
        cur = sum(p.rss_bytes or 0 for p in procs) + r.randrange(2 << 30, 3 << 30)

        def avg10() -> float:
            return round(r.uniform(0, 8), 2) if r.random() < 0.4 else 0.0

        psi = M(
            {
                k: M({"some_avg10": avg10(), "full_avg10": avg10() if k != "cpu" else 0.0})
                for k in ("cpu", "memory", "io")
            }
        )
        cgroup = CgroupSample(
            version="v2", cpu_quota_cpus=32.0, cpu_quota_path="/sys/fs/cgroup/slurm/job_81723",
            cpu_usage_cores=use + r.uniform(0.0, 0.3), throttled_ratio=r.uniform(0.0, 0.02),
            throttled_s_per_s=r.uniform(0.0, 0.01), mem_limit_bytes=256 << 30,
            mem_limit_path="/sys/fs/cgroup/slurm/job_81723", mem_current_bytes=cur,
            mem_working_set_bytes=cur - r.randrange(1 << 30, 2 << 30), mem_events=self.events,
            mem_events_new=self.events, swap_bytes=0, psi_scope="cgroup", psi=psi,
        )  # fmt: skip
        return HostSample(
            pid=PID, t=t, wall=wall, state="running", exit_code=None, processes=procs,
            effective_cpus=32.0, effective_cpus_source="cgroup quota", affinity_cpus=64,
            cgroup=cgroup, env=ENV,
        )  # fmt: skip


# ---- agents ---------------------------------------------------------------------------------

PHASES = {"data_wait": 0.06, "h2d": 0.04, "forward": 0.30, "backward": 0.42, "grad_sync": 0.08,
          "optimizer": 0.07}  # fmt: skip
GPU_PHASES = ("h2d", "forward", "backward", "optimizer")
FINGERPRINT = M({
    "OMP_NUM_THREADS": "8", "torch": "2.5.1+cu124", "cuda": "12.4", "intra_op_threads": 8,
    "interop_threads": 8, "float32_matmul_precision": "high", "cudnn_benchmark": True,
    "anomaly_detection": False, "compiled": 0, "autocast": True, "autocast_dtype": "bfloat16",
    "param_dtype": "float32",
    "dataloader": M({"num_workers": 4, "pin_memory": True, "batch_size": 32,
                     "persistent_workers": True, "prefetch_factor": 2}),
})  # fmt: skip


class AgentGen:
    """One agent's steps as AgentLink reports them: the last STEP_HISTORY, GPU times a
    reading late, a heartbeat."""

    def __init__(self, steps_per_s: float, rng: random.Random) -> None:
        self.rng = rng
        self.period_ns = int(1e9 / steps_per_s)
        self.steps: deque[StepRecord] = deque(maxlen=STEP_HISTORY)
        self.pending = False  # the newest step's GPU times are still to come
        self.n = 0
        self.next_t0 = int(T0 * 1e9)
        self.upcoming = self._step()

    def _step(self) -> StepRecord:
        r = self.rng
        dur = int(self.period_ns * r.lognormvariate(0.0, 0.04))
        phases = {k: int(dur * share * r.uniform(0.9, 1.1)) for k, share in PHASES.items()}
        over = sum(phases.values()) - dur
        if over > 0:
            phases["backward"] -= over + r.randrange(0, max(1, dur // 200))
        gc_ns = r.randrange(20_000, 900_000) if r.random() < 0.3 else 0
        s = StepRecord(step=self.n, t0_ns=self.next_t0, dur_ns=dur, phases=M(phases),
                       samples=32, tokens=32 * 2048, flops=6.0 * 1.2e9 * 32 * 2048,
                       gc_ns=gc_ns, gc_full=int(r.random() < 0.002))  # fmt: skip
        self.n += 1
        self.next_t0 += dur
        return s

    def _resolve(self, back: int) -> None:
        """The GPU times of the step ``back`` from the newest have come in."""
        i = len(self.steps) - back
        s = self.steps[i]
        gpu = {k: int(s.phases[k] * self.rng.uniform(0.8, 0.98)) for k in GPU_PHASES}
        self.steps[i] = dataclasses.replace(s, gpu=M(gpu))

    def sample(self, t: float, wall: float) -> AgentsSample:
        r = self.rng
        if self.pending:  # the newest step of the last reading: its CUDA events are done now
            self._resolve(1)
        now_ns = int(t * 1e9)
        added = 0
        while self.upcoming.t0_ns + self.upcoming.dur_ns <= now_ns:
            self.steps.append(self.upcoming)
            self.upcoming = self._step()
            added += 1
        for back in range(2, min(added, len(self.steps)) + 1):  # the older new ones are done
            self._resolve(back)
        self.pending = added > 0  # the newest one is not
        agent = AgentState(
            pid=PID, state="connected", rank=0, local_rank=0, world_size=1, hostname="gpu-node-17",
            argv=tuple(CMDLINE.split()[1:]), fingerprint=FINGERPRINT, steps=tuple(self.steps),
            open_phase=r.choice(tuple(PHASES)), open_age_s=r.uniform(0, self.period_ns / 1e9),
            since_step_s=r.uniform(0, self.period_ns / 1e9), heartbeat_age_s=r.uniform(0, 0.25),
            agent_errors=0, dropped=0,
        )  # fmt: skip
        return AgentsSample(target=PID, t=t, wall=wall, agents=(agent,))


# ---- stacks ---------------------------------------------------------------------------------


def _chain(prefix: str, file: str, n: int, line0: int) -> list[Frame]:
    return [Frame(f"{prefix}_{i}", file, line0 + 7 * i) for i in range(n)]


BOOT = [Frame("Thread.run", "threading.py", 1012), Frame("Thread._bootstrap_inner",
        "threading.py", 1075), Frame("Thread._bootstrap", "threading.py", 1032)]  # fmt: skip
LOOP = [  # outermost last: the trainer's own loop inside lightning's
    Frame("_run_optimization", "lightning/pytorch/loops/optimization/automatic.py", 217),
    Frame("TrainingEpochLoop.advance", "lightning/pytorch/loops/training_epoch_loop.py", 250),
    Frame("TrainingEpochLoop.run", "lightning/pytorch/loops/training_epoch_loop.py", 140),
    Frame("FitLoop.advance", "lightning/pytorch/loops/fit_loop.py", 355),
    Frame("FitLoop.run", "lightning/pytorch/loops/fit_loop.py", 205),
    Frame("Trainer._run_stage", "lightning/pytorch/trainer/trainer.py", 1025),
    Frame("Trainer._run", "lightning/pytorch/trainer/trainer.py", 981),
    Frame("Trainer._fit_impl", "lightning/pytorch/trainer/trainer.py", 579),
    Frame("_call_and_handle_interrupt", "lightning/pytorch/trainer/call.py", 47),
    Frame("Trainer.fit", "lightning/pytorch/trainer/trainer.py", 543),
    Frame("main", "train.py", 188),
    Frame("<module>", "train.py", 203),
]
MODULE = "torch/nn/modules/module.py"
MAIN_VARIANTS: list[tuple[list[Frame], bool]] = []
for _depth in range(4):  # forward at various depths of the model
    _fwd = [Frame("scaled_dot_product_attention", "torch/nn/functional.py", 5100 + _depth)]
    for _k in range(6 + 3 * _depth):
        _fwd += [Frame(f"Block{_k % 4}.forward", "model/llama.py", 80 + 11 * (_k % 4)),
                 Frame("Module._call_impl", MODULE, 1747), Frame("Module._wrapped_call_impl",
                 MODULE, 1736)]  # fmt: skip
    MAIN_VARIANTS.append((_fwd[:24] + LOOP, True))
MAIN_VARIANTS += [
    ([Frame("_engine_run_backward", "torch/autograd/graph.py", 825),
      Frame("backward", "torch/autograd/__init__.py", 347),
      Frame("Tensor.backward", "torch/_tensor.py", 581),
      *_chain("backward_hook", "lightning/pytorch/core/module.py", 6, 1070), *LOOP], True),
    ([Frame("_multi_tensor_adamw", "torch/optim/adamw.py", 612),
      Frame("adamw", "torch/optim/adamw.py", 367), Frame("AdamW.step", "torch/optim/adamw.py", 209),
      Frame("Optimizer.profile_hook_step", "torch/optim/optimizer.py", 487),
      *_chain("optimizer_step", "lightning/pytorch/core/optimizer.py", 5, 150), *LOOP], True),
    ([Frame("Connection._poll", "multiprocessing/connection.py", 440),
      Frame("Connection.poll", "multiprocessing/connection.py", 257),
      Frame("Queue.get", "multiprocessing/queues.py", 113),
      Frame("_MultiProcessingDataLoaderIter._try_get_data", "torch/utils/data/dataloader.py", 1251),
      Frame("_MultiProcessingDataLoaderIter._get_data", "torch/utils/data/dataloader.py", 1412),
      Frame("_MultiProcessingDataLoaderIter._next_data", "torch/utils/data/dataloader.py", 1448),
      Frame("_BaseDataLoaderIter.__next__", "torch/utils/data/dataloader.py", 708),
      *_chain("fetch_batch", "lightning/pytorch/loops/fetchers.py", 5, 130), *LOOP], False),
]  # fmt: skip
MAIN_WEIGHTS = [0.1, 0.1, 0.1, 0.1, 0.4, 0.1, 0.1]
SIDE_THREADS = [  # (name, frames innermost first)
    ("pin_memory", [Frame("Queue.get", "queue.py", 180), Frame("do_one_step",
     "torch/utils/data/_utils/pin_memory.py", 32), Frame("_pin_memory_loop",
     "torch/utils/data/_utils/pin_memory.py", 55), *_chain("run", "threading.py", 14, 990),
     *BOOT]),
    ("EventFileWriter", [Frame("Condition.wait", "threading.py", 359), Frame("Queue.get",
     "queue.py", 180), *_chain("_AsyncWriterThread.run", "tensorboard/summary/writer/"
     "event_file_writer.py", 18, 240), *BOOT]),
    ("wandb-SenderThread", [Frame("Event.wait", "threading.py", 655),
     *_chain("SockClient._read_packet", "wandb/sdk/lib/sock_client.py", 27, 250), *BOOT]),
    ("wandb-HandlerThread", [Frame("Event.wait", "threading.py", 655),
     *_chain("HandleManager.handle", "wandb/sdk/internal/handler.py", 22, 110), *BOOT]),
    ("SystemMonitor", [Frame("Event.wait", "threading.py", 655),
     *_chain("SystemMonitor._start", "wandb/sdk/internal/system/system_monitor.py", 30, 120),
     *BOOT]),
    ("ckpt-async", [Frame("Condition.wait", "threading.py", 359),
     *_chain("AsyncCheckpointIO._worker", "lightning/fabric/plugins/io/async_plugin.py", 20, 60),
     *BOOT]),
    ("QueueFeederThread", [Frame("Condition.wait", "threading.py", 359),
     *_chain("Queue._feed", "multiprocessing/queues.py", 17, 231), *BOOT]),
]  # fmt: skip
WORKER_BASE = [
    *_chain("DataLoaderWorker.fetch", "torch/utils/data/_utils/fetch.py", 2, 50),
    Frame("_MapDatasetFetcher.fetch", "torch/utils/data/_utils/fetch.py", 52),
    Frame("_worker_loop", "torch/utils/data/_utils/worker.py", 351),
    *_chain("Process.run", "multiprocessing/process.py", 4, 108),
    *_chain("Popen._launch", "multiprocessing/popen_fork.py", 4, 71),
    *_chain("_launch", "multiprocessing/context.py", 6, 282),
]
WORKER_LEAVES = [
    [Frame("decode", "PIL/ImageFile.py", 291), *_chain("Image.load", "PIL/Image.py", 4, 880)],
    [Frame("resize", "PIL/Image.py", 2305), *_chain("Resize.forward",
     "torchvision/transforms/transforms.py", 6, 354)],
    [Frame("normalize", "torchvision/transforms/functional.py", 928), *_chain("Normalize.forward",
     "torchvision/transforms/transforms.py", 5, 277)],
    [Frame("default_collate", "torch/utils/data/_utils/collate.py", 398), *_chain("collate",
     "torch/utils/data/_utils/collate.py", 3, 171)],
    [Frame("TokenizerFast.encode", "tokenizers/implementations/base_tokenizer.py", 228),
     *_chain("TextDataset.__getitem__", "data/text.py", 8, 40)],
]  # fmt: skip


_THREADS: dict[tuple[Any, ...], ThreadStack] = {}


def _thread(tid: int, name: str, frames: list[Frame], active: bool) -> ThreadStack:
    key = (tid, name, tuple(frames), active)
    t = _THREADS.get(key)
    if t is None:  # classified once: the stacks repeat
        phase, deciding = classify(frames, active)
        t = _THREADS[key] = ThreadStack(tid, name, active, key[2], phase, deciding)
    return t


class StacksGen:
    """StackSource's output: the main process every second, one worker in turn, the other
    workers' last dumps kept."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.side_lines = [0] * len(SIDE_THREADS)
        self.workers = [PID + 1000 + 10 * w for w in range(4)]
        self.last: dict[int, ProcessStacks] = {}
        self.turn = 0

    def sample(self, t: float, wall: float) -> StacksSample:
        r = self.rng
        frames, active = r.choices(MAIN_VARIANTS, MAIN_WEIGHTS)[0]
        threads = [_thread(PID, "MainThread", frames, active)]
        for k, (name, base) in enumerate(SIDE_THREADS):
            if r.random() < 0.03:  # now and then a thread is on another line of its loop
                self.side_lines[k] = r.randrange(3)
            leaf = base[0]
            leaf = Frame(leaf.name, leaf.file, (leaf.line or 0) + self.side_lines[k])
            threads.append(_thread(PID + 30 + k, name, [leaf, *base[1:]], False))
        self.last[PID] = ProcessStacks(PID, "main", tuple(threads), None, r.uniform(0.01, 0.04))
        w = self.workers[self.turn % len(self.workers)]
        self.turn += 1
        leaf = r.choice(WORKER_LEAVES)
        wt = [_thread(w, "MainThread", [*leaf, *WORKER_BASE], True)]
        wt.append(_thread(w + 1, "QueueFeederThread", SIDE_THREADS[-1][1], False))
        self.last[w] = ProcessStacks(w, "worker", tuple(wt), None, r.uniform(0.005, 0.02))
        procs = tuple(self.last[p] for p in [PID, *self.workers] if p in self.last)
        return StacksSample(PID, t, wall, procs)


# ---- the session ----------------------------------------------------------------------------


class BenchSession(Session):
    """gputop's own Session (gputop/session.py: Timeline, sinks, the verdict at the point the
    readings define) with the recorder as its sink. Only the evaluation is wrapped: timed while
    the verdict is evaluated for real, and after ``real_s`` fake seconds (None: never), or from
    the start when ``reuse`` is given, the recorder is handed recorded verdicts again in their
    order at the same points."""

    def __init__(
        self,
        path: Path,
        clock: Clock,
        gpus: Any,
        reuse: list[Any] | None = None,
        real_s: float | None = None,
    ) -> None:
        self.clock = clock
        self.rec = Recorder(path, clock=clock)
        super().__init__(gpus.devices, sinks=Sinks([self.rec]), clock=clock, wall=clock.wall)
        self.start(
            {
                "mode": "demo",
                "pid": PID,
                "command": CMDLINE.split(),
                "simulated": "8x H100 SXM5 80GB, mixed workload",
            }
        )
        self.reuse = reuse
        self.real_until = clock() + real_s if real_s is not None else float("inf")
        self.verdicts: list[Any] = []
        self.evaluated = 0
        self.eval_s = 0.0

    @property
    def evaluating(self) -> bool:
        return self.reuse is None and self.clock() < self.real_until

    def evaluate(self, point: Any = None, shown: Any = None) -> Any:
        point = point if point is not None else self.point()
        if point is None:
            return None
        if self.evaluating:
            t0 = time.perf_counter()
            verdict = super().evaluate(point)
            self.eval_s += time.perf_counter() - t0
            self.evaluated += 1
        else:
            again = self.reuse if self.reuse is not None else self.verdicts[: self.evaluated]
            verdict = again[(len(self.verdicts) - self.evaluated) % len(again)]
            self.sinks.verdict(point, verdict)
        self.verdicts.append(verdict)
        return verdict


def record(
    path: Path,
    hours: float,
    steps_per_s: float,
    seed: int,
    gpus: Callable[[Clock], Any],
    reuse: list[Any] | None = None,
    real_s: float | None = None,
) -> tuple[BenchSession, float]:
    """A session of ``hours`` at the TUI's rates; (session, generation seconds)."""
    rng = random.Random(seed)
    clock = Clock()
    feed = gpus(clock)
    host, agents, stacks = HostGen(rng), AgentGen(steps_per_s, rng), StacksGen(rng)
    s = BenchSession(path, clock, feed, reuse, real_s)
    every = [  # (offset in the second, period, reader, ingest): the samplers' threads
        (0.0012, INTERVAL_S, lambda: feed.sample(), s.gpu),
        (0.25, AGENT_S, lambda: agents.sample(clock(), clock.wall()), s.agents),
        (0.5, STACKS_S, lambda: stacks.sample(clock(), clock.wall()), s.stacks),
        (0.7, INTERVAL_S, lambda: host.sample(clock(), clock.wall()), s.host),
    ]
    started = time.perf_counter()
    try:
        for sec in range(round(hours * 3600)):
            for offset, period, read, ingest in every:
                if sec % round(period) == 0:
                    clock.t = T0 + sec + offset + rng.uniform(0.0, 0.003)
                    ingest(read())
        clock.t += 1.0
        s.rec.close()
    finally:
        feed.close()
    if s.rec.problem:
        raise SystemExit(s.rec.problem)
    return s, time.perf_counter() - started


# ---- what is in the file --------------------------------------------------------------------


def composition(path: Path) -> tuple[dict[str, list[int]], dict[str, int]]:
    """Per record kind: [lines, JSON bytes, bytes when compressed on their own per segment];
    and the file's bytes per frame kind (payload + frame header)."""
    kinds: dict[str, list[int]] = {}
    by_frame = {"header": 0, "data": 0, "summary": 0, "frame headers": 0}
    segment: dict[str, list[bytes]] = {}

    def close_segment() -> None:
        for k, lines in segment.items():
            kinds[k][2] += len(zlib.compress(b"\n".join(lines), 6))
        segment.clear()

    stream: Any = None
    with path.open("rb") as f:
        for fr in frames(f, str(path), Scan()):
            by_frame["frame headers"] += FRAME.size
            if fr.kind == HEADER:
                by_frame["header"] += len(fr.payload) + len(MAGIC)
            elif fr.kind == SUMMARY:
                by_frame["summary"] += len(fr.payload)
            elif fr.kind == DATA:
                by_frame["data"] += len(fr.payload)
                if fr.flags & NEW_STREAM:
                    close_segment()
                    stream = zlib.decompressobj()
                for line in stream.decompress(fr.payload).splitlines():
                    k = _kind(line)
                    kinds.setdefault(k, [0, 0, 0])
                    kinds[k][0] += 1
                    kinds[k][1] += len(line) + 1
                    segment.setdefault(k, []).append(line)
    close_segment()
    return kinds, by_frame


def _kind(line: bytes) -> str:
    """The first JSON element, as the reader dispatches; agents and verdicts split in two."""
    rec = json.loads(line)
    k = rec[0]
    if k == "a":
        return "a (all 512 steps)" if any(a[1][0] == "all" for a in rec[5]) else "a (delta)"
    if k == "v":
        return "v (same verdict)" if rec[2] == 0 else "v (verdict)"
    return k


NAMES = {"g": "GPU readings", "h": "host", "s": "stacks", "F": "stack frames", "e": "events"}


def print_composition(path: Path) -> None:
    kinds, by_frame = composition(path)
    total = path.stat().st_size
    raw_total = sum(v[1] for v in kinds.values())
    alone_total = sum(v[2] for v in kinds.values())
    print(
        "  file by frame kind: "
        + ", ".join(f"{k} {v / 1e3:,.0f} kB ({v / total:.1%})" for k, v in by_frame.items())
    )
    print("  data by record kind: JSON as written, and each kind compressed on its own per")
    print("  segment (an estimate of its share of the compressed data frames):")
    print(
        f"    {'kind':<22} {'records':>8} {'JSON MB':>8} {'share':>6} {'zlib MB':>8} {'share':>6}"
    )
    for k, (n, raw, alone) in sorted(kinds.items(), key=lambda kv: -kv[1][2]):
        label = f"{k} {NAMES.get(k, '')}".strip()
        print(
            f"    {label:<22} {n:>8} {raw / MB:>8.2f} {raw / raw_total:>6.1%}"
            f" {alone / MB:>8.3f} {alone / alone_total:>6.1%}"
        )


# ---- report timing --------------------------------------------------------------------------


def time_report(path: Path, repeat: int = 3) -> tuple[float, float, Any]:
    """(in-process seconds, min of ``repeat``; subprocess wall seconds; the recording)."""
    best = float("inf")
    rec = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        rec = open_recording(path)
        render_report(build_report(rec))
        best = min(best, time.perf_counter() - t0)
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "gputop", "report", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"gputop report failed: {done.stderr.strip()}")
    return best, wall, rec


def cut_after_last_summary(src: Path, dst: Path, tail_s: float = 30.0) -> tuple[int, float]:
    """``src`` as if gputop had been killed ``tail_s`` after its last minute summary (the
    closing summary and the data after the cut are dropped). (bytes kept, seconds of data
    kept after the summary)."""
    spans = []  # (kind, end offset, t)
    with src.open("rb") as f:
        for fr in frames(f, str(src), Scan()):
            spans.append((fr.kind, fr.offset + FRAME.size + len(fr.payload), fr.t))
    last = [i for i, sp in enumerate(spans) if sp[0] == SUMMARY][-2]
    start_t = spans[last + 1][2]
    end, kept_t = spans[last][1], start_t
    for kind, stop, t in spans[last + 1 :]:
        if kind != DATA or t > start_t + tail_s:
            break
        end, kept_t = stop, t
    with src.open("rb") as f:
        dst.write_bytes(f.read(end))
    return end, kept_t - start_t


def decode_all(path: Path) -> tuple[int, float, str | None]:
    """Every record decoded, as replay does: (records, seconds, damage)."""
    t0 = time.perf_counter()
    rec = open_recording(path)
    n = sum(1 for _ in rec.records())
    return n, time.perf_counter() - t0, rec.damage


# ---- main ----------------------------------------------------------------------------------

REAL_S = 600.0
"""The day-long file: board readings and verdicts for real over its first 10 minutes."""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hours", type=float, default=1.0, help="length of the size run")
    ap.add_argument("--report-hours", type=float, default=24.0)
    ap.add_argument("--steps-per-s", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", type=Path, metavar="DIR", help="keep the recordings here")
    ap.add_argument("--day-file", type=Path, help=argparse.SUPPRESS)  # the second process
    args = ap.parse_args()
    if args.day_file is not None:
        day_file(args)
        return
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        folder = args.keep
    else:
        folder = Path(tempfile.mkdtemp(prefix="gputop-bench-rec-"))
    cpu = f"platform.processor() {platform.processor()!r} (cpuinfo: {_cpu_model()})"
    print(f"host: {cpu}, os.cpu_count() {os.cpu_count()}, Python {platform.python_version()}")
    print(
        f"8 simulated H100 (mixed workload) and the host read every {INTERVAL_S:g} s, the agent"
        f" every {AGENT_S:g} s, stacks every {STACKS_S:g} s; a verdict after each reading"
    )
    day = _fresh(folder / f"day-{args.report_hours:g}h.gputop")
    child = None
    try:
        real = size_run(args, folder)
        # the day-long file is written by a second process while this one goes on: after the
        # size run, so that the board and verdict times above are not shared with it
        child = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--day-file",
                str(day),
                "--report-hours",
                str(args.report_hours),
                "--steps-per-s",
                str(args.steps_per_s),
                "--seed",
                str(args.seed),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        per_h = size_by_rate(args, folder, *real)
        out, _ = child.communicate()
        if child.returncode != 0:
            raise SystemExit("generating the day-long recording failed")
        slowest = report_run(args, day, folder, json.loads(out)["took"])
        n, secs, damage = decode_all(real[0])
        print(
            f"\n3. Every record of the {args.hours:g} h file decoded (what replay reads):"
            f" {n:,} records in {secs:.1f} s" + (f"; stopped early: {damage}" if damage else "")
        )
    finally:
        if child is not None and child.poll() is None:
            child.kill()
            child.wait()
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"\nhost: {cpu}, os.cpu_count() {os.cpu_count()}")
    mark = "PASS" if per_h < TARGET_MB_PER_H else "FAIL"
    print(
        f"{mark}: {per_h:.2f} MB per hour at {args.steps_per_s:g} steps/s, 8 GPUs, one trainer"
        f" (target < {TARGET_MB_PER_H:g} MB/h)"
    )
    mark = "PASS" if slowest < TARGET_REPORT_S else "FAIL"
    print(
        f"{mark}: gputop report on {args.report_hours:g} h: {slowest:.2f} s at worst"
        f" (target < {TARGET_REPORT_S:g} s)"
    )


def day_file(args: argparse.Namespace) -> None:
    """The second process: the day-long recording; prints how long it took, as JSON."""
    seed = args.seed + 1
    _, took = record(
        args.day_file,
        args.report_hours,
        args.steps_per_s,
        seed,
        lambda c: BoardGpus(c, seed, REAL_S),
        real_s=REAL_S,
    )
    print(json.dumps({"took": took}))


def _fresh(path: Path) -> Path:
    path.unlink(missing_ok=True)  # the recorder never overwrites
    return path


def size_run(args: argparse.Namespace, folder: Path) -> tuple[Path, Session, BoardGpus]:
    print(f"\n1. Recording size: {args.hours:g} h session")
    board: list[BoardGpus] = []

    def make_board(clock: Clock) -> BoardGpus:
        board.append(BoardGpus(clock, args.seed))
        return board[0]

    path = _fresh(folder / f"size-{args.steps_per_s:g}steps.gputop")
    session, took = record(path, args.hours, args.steps_per_s, args.seed, make_board)
    b, n = board[0], session.evaluated
    print(
        f"  generated in {took:.1f} s: board {b.seconds / len(b.taken) * 1e3:.2f} ms per 8-GPU"
        f" reading, verdict {session.eval_s / n * 1e3:.2f} ms x {n:,} evaluations"
    )
    principal: dict[str, int] = {}
    for v in session.verdicts:
        name = v.principal.bound if v.principal else "none"
        principal[name] = principal.get(name, 0) + 1
    ranked = sorted(principal.items(), key=lambda kv: -kv[1])
    print("  principal bound: " + ", ".join(f"{k} {c / n:.1%}" for k, c in ranked))
    return path, session, b


def size_by_rate(
    args: argparse.Namespace, folder: Path, path: Path, session: Session, b: BoardGpus
) -> float:
    size = path.stat().st_size
    per_h = size / args.hours / MB
    print(f"  {args.steps_per_s:g} steps/s: {size:,} bytes, {per_h:.2f} MB per hour")
    print_composition(path)
    sizes = {args.steps_per_s: size}
    for rate in RATES:
        if rate != args.steps_per_s:
            other = _fresh(folder / f"size-{rate:g}steps.gputop")
            replay = lambda c: ReplayGpus(c, b.devices, b.taken)  # noqa: E731
            record(other, args.hours, rate, args.seed, replay, session.verdicts)
            sizes[rate] = other.stat().st_size
    print("  by step rate (the same GPU readings and verdicts again):")
    for rate, n in sorted(sizes.items()):
        mb = n / args.hours / MB
        mark = "PASS" if mb < TARGET_MB_PER_H else "FAIL"
        print(f"    {rate:>4g} steps/s: {n:>11,} bytes, {mb:5.2f} MB per hour  {mark}")
    return per_h


def report_run(args: argparse.Namespace, path: Path, folder: Path, took: float) -> float:
    print(f"\n2. `gputop report` on a {args.report_hours:g} h recording")
    size = path.stat().st_size
    print(
        f"  generated in {took:.1f} s by a second process (board and verdicts real over the"
        f" first {REAL_S / 60:g} min, then again in a loop): {size:,} bytes,"
        f" {size / args.report_hours / MB:.2f} MB per hour"
    )
    inproc, sub, _ = time_report(path)
    print(f"  build_report + render_report in process: {inproc:.2f} s (min of 3)")
    print(f"  python -m gputop report FILE > /dev/null: {sub:.2f} s wall")
    cut = _fresh(folder / f"day-{args.report_hours:g}h-cut.gputop")
    kept, tail = cut_after_last_summary(path, cut)
    c_inproc, c_sub, c_rec = time_report(cut)
    print(f"  cut {tail:.0f} s of data after its last summary ({kept:,} bytes):")
    print(
        f"    in process {c_inproc:.2f} s (min of 3), subprocess {c_sub:.2f} s wall;"
        f" the tail costs {c_inproc - inproc:+.2f} s"
    )
    if c_rec.damage:
        print(f"    reader: {c_rec.damage}")
    return max(inproc, sub, c_inproc, c_sub)


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


if __name__ == "__main__":
    main()
