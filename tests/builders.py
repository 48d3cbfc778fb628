"""Readings built by hand for tests: a device, a GPU reading, a step, an agent, a recording,
in one place (test modules import them: ``from builders import device, ...``)."""

from __future__ import annotations

import json
import sys
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType as M
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from gputop.model import Window
from gputop.model.gpu import DeviceInfo, GpuSample
from gputop.model.host import HostSample, ProcSample
from gputop.model.stacks import Frame, ProcessStacks, StacksSample, ThreadStack
from gputop.model.steps import AgentsSample, AgentState, StepRecord
from gputop.sources.stack_phases import classify
from gputop.sources.stacks import PySpy, explain

if TYPE_CHECKING:
    from gputop.diagnose.findings import Finding, Verdict
    from gputop.record.reader import Record
    from gputop.session import SessionState

MS = 1_000_000


def device(index: int, name: str = "NVIDIA H100 80GB HBM3") -> DeviceInfo:
    """An H100 SXM: 1980 MHz max SM clock, 700 W default limit, GPM supported."""
    return DeviceInfo(
        index, name, f"GPU-{index:08d}", None, None, "hopper", 1980, 1980, 2619, 700.0, 200.0,
        700.0, 80 << 30, 92, 87, 85, 95, 5, 16, 18, True, False,
    )  # fmt: skip


def gpu_sample(index: int, t: float, reasons: tuple[str, ...] = (), **kw: Any) -> GpuSample:
    """A busy GPU's reading at ``t`` (wall clock ``t`` + 1.7e9) showing ``reasons``."""
    fields: dict[str, Any] = {
        "sm_clock_mhz": 1980,
        "power_w": 650.0,
        "power_limit_w": 700.0,
        "temp_c": 70,
        "util_gpu_pct": 90,
        "mem_used_bytes": 40 << 30,
        "reasons_mask": 0x4 if reasons else 0,
        "reasons": reasons,
        "sm_active_pct": 80.0,
        "dram_bw_pct": 50.0,
    }
    return GpuSample(index, t, t + 1.7e9, **{**fields, **kw})


def step(n: int, t0_ns: int, phases_ms: dict[str, float], dur_ms: float | None = None,
         **kw: Any) -> StepRecord:  # fmt: skip
    """Step ``n`` from ``t0_ns``, its phases in milliseconds; it lasts their sum unless told."""
    total = dur_ms if dur_ms is not None else sum(phases_ms.values())
    ns = M({k: round(v * MS) for k, v in phases_ms.items()})
    return StepRecord(n, t0_ns, round(total * MS), ns, **kw)


def agent(pid: int, steps: tuple[StepRecord, ...], rank: int | None = None,
          **kw: Any) -> AgentState:  # fmt: skip
    """A connected agent (local rank = rank) with these recent steps, in forward."""
    fields: dict[str, Any] = {
        "state": "connected", "local_rank": rank, "world_size": None, "hostname": "node",
        "argv": ("python", "train.py"), "fingerprint": M({}), "open_phase": "forward",
        "open_age_s": 0.25, "since_step_s": 0.05, "heartbeat_age_s": 0.1, "agent_errors": 0,
        "dropped": 0,
    }  # fmt: skip
    return AgentState(pid=pid, rank=rank, steps=steps, **{**fields, **kw})


def job_readings(every_save: int, seconds: int, ranks: int = 1, slow_rank: int | None = None,
                 t0: float = 0.0, kept: int = 300):  # fmt: skip
    """One agents' reading a second (at ``t0`` + 1, + 2, ...) of ranks stepping 10 times a
    second (80 ms forward, 20 ms data), a 500-ms checkpoint every ``every_save`` seconds; rank
    ``slow_rank`` computes 40 ms longer and the others wait for it in their gradient sync.
    Each reading repeats the last ``kept`` steps, as an agent's does."""
    history: dict[int, list] = {r: [] for r in range(ranks)}
    n = 0
    for t in range(1, seconds + 1):
        for i in range(10):
            for r in range(ranks):
                phases = {"data_wait": 20.0, "forward": 80.0}
                if slow_rank is not None:
                    phases["forward"] += 40.0 if r == slow_rank else 0.0
                    phases["grad_sync"] = 0.0 if r == slow_rank else 40.0
                if t % every_save == 0 and i == 0:
                    phases["checkpoint"] = 500.0
                history[r].append(step(n, n * 100 * MS, phases))
            n += 1
        world = ranks if ranks > 1 else None
        agents = tuple(
            agent(100 + r, tuple(history[r][-kept:]), rank=r, world_size=world)
            for r in range(ranks)
        )
        yield AgentsSample(target=100, t=t0 + t, wall=1e9 + t0 + t, agents=agents)


PROC = {
    "start_ticks": 1, "ppid": 1, "cmdline": "train.py", "state": "R", "cpu_cores": 1.0,
    "rss_bytes": 1 << 30, "uss_bytes": None, "pss_bytes": None, "num_threads": 4,
    "threads_running": 1, "threads_disk_wait": 0, "threads": (), "runq_wait": 0.0,
    "ctx_voluntary_rate": None, "ctx_involuntary_rate": None, "read_chars_rate": None,
    "read_bytes_rate": None, "write_bytes_rate": None, "open_fds": None,
}  # fmt: skip
"""A Python process of the job at one core: 1 GiB resident, four threads, one running."""


def proc(pid: int = 100, role: str = "main", **fields: Any) -> ProcSample:
    """A process of the job, every field by name over ``PROC`` (a DataLoader worker is named as
    torch names it)."""
    name = "pt_data_worker" if role == "worker" else "python"
    return ProcSample(**{"pid": pid, "role": role, "name": name, **PROC, **fields})


def proc_sample(pid: int, role: str, cores: float, runq: float = 0.0, rank: int | None = None,
                running: int = 1) -> ProcSample:  # fmt: skip
    """A process of the job using ``cores``, its threads waiting ``runq`` s/s for a CPU."""
    return proc(pid, role, cpu_cores=cores, runq_wait=runq, rank=rank, threads_running=running)


def host_at(t: float, procs: Sequence[ProcSample], cpus: float = 8.0, **fields: Any) -> HostSample:
    """One host reading at ``t`` of a tree on ``cpus`` CPUs (the machine's), every other field
    by name."""
    base = {
        "pid": procs[0].pid if procs else 100, "t": float(t), "wall": 0.0, "state": "running",
        "exit_code": None, "processes": tuple(procs), "effective_cpus": cpus,
        "effective_cpus_source": "machine", "affinity_cpus": max(1, round(cpus)),
        "cgroup": None, "env": M({}),
    }  # fmt: skip
    return HostSample(**{**base, **fields})


def host_readings(procs: Sequence[ProcSample], times: Iterable[float], cpus: float = 8.0,
                  **fields: Any) -> Window:  # fmt: skip
    """Host readings of one tree at ``times``, as a window from the first to the last."""
    samples = tuple(host_at(t, procs, cpus, **fields) for t in times)
    return Window(samples, samples[0].t if samples else 0.0, samples[-1].t if samples else 0.0)


def host_window(procs: tuple[ProcSample, ...], cpus: float = 8.0, n: int = 5) -> Window:
    """``n`` host readings a second apart of one tree on ``cpus`` CPUs."""
    return replace_end(host_readings(procs, range(n), cpus, affinity_cpus=64), float(n))


def replace_end(w: Window, end: float) -> Window:
    """``w`` ending at ``end`` (a window of readings a second apart ends a second after them)."""
    return Window(w.samples, w.start, end)


Stack = tuple[tuple[str, str], ...]
"""A thread's frames as (file, function), innermost first."""


def stacks_window(threads: dict[tuple[int, str], list[Stack]], n: int = 20,
                  via: str = "py-spy") -> Window:  # fmt: skip
    """``n`` stack readings a second apart: each (pid, role)'s main thread cycles through its
    stacks (each a read of its own, by ``via``); phases classified as the stack source does."""
    samples = []
    for i in range(n):
        procs = []
        for (pid, role), stacks in threads.items():
            frames = tuple(Frame(name, file, 10 + j) for j, (file, name) in
                           enumerate(stacks[i % len(stacks)]))  # fmt: skip
            phase, deciding = classify(frames, True)
            t = ThreadStack(pid, "MainThread", True, frames, phase, deciding)
            procs.append(ProcessStacks(pid, role, (t,), via=via, taken=float(i)))
        samples.append(StacksSample(100, float(i), 0.0, tuple(procs)))
    return Window(tuple(samples), 0.0, float(n))


# ---- py-spy's answers, scripted ----

RACE = explain("Error: Failed to get stack traces", 1, 0).replace(" 0:", " {pid}:")
"""py-spy's nonblocking read losing a race with the interpreter (``{pid}`` to fill in)."""
MAIN = ThreadStack(1, "MainThread", True, (Frame("main", "job.py", 3),), "user code", None)
"""The one thread a ``ScriptedSpy`` read gives."""


class ScriptedSpy(PySpy):
    """py-spy's answers in order, and the calls made (pid, blocking)."""

    def __init__(self, *answers: str | None) -> None:
        super().__init__(binary=sys.executable)  # never run: dump is replaced
        self.answers = list(answers)
        self.calls: list[tuple[int, bool]] = []

    def dump(self, pid: int, blocking: bool = False, native: bool = False):
        self.calls.append((pid, blocking))
        error = self.answers.pop(0)
        if error is None:
            return [MAIN], None
        return None, error.format(pid=pid)


# ---- a session of known content, for `gputop report` ----

T0 = 1000.0
SECONDS = 120
"""How long ``record_session`` records: a reading a second from ``T0``."""
CAPPED = range(40, 70)
"""The readings at which GPU 0 shows sw_power_cap (each holds until the next: 40..70 s)."""
SPLITS = {0: {"data_wait": 20.0, "forward": 80.0}, 1: {"forward": 60.0, "checkpoint": 40.0}}
"""Each rank's step, in ms: rank 0 20 % data, 80 % compute; rank 1 40 % checkpoint."""
CRAFTED = "<script>alert(1)</script><img src=http://example.invalid/x.png>"
"""Text a page must show as text: in the command line, a finding and a capture's folder."""


def _session_verdict(k: int) -> Verdict:
    from gputop.diagnose.findings import Evidence, Finding, Verdict

    evidence = (Evidence(f"saves {CRAFTED}", "agent"),)
    f = Finding("side-work", True, 0.6, f"checkpointing {CRAFTED}", evidence,
                (f"save less often {CRAFTED}",))  # fmt: skip
    return Verdict(f if k >= 5 else None, (), (f,) if k >= 5 else (), T0 + 5, "", ("agent",))


def record_session(path: Path) -> None:
    """``SECONDS`` of a diagnose session through the Recorder: two ranks stepping ``SPLITS``,
    GPU 0 power-capped at ``CAPPED``, a finding and a capture naming ``CRAFTED``."""
    from gputop.diagnose.point import EvalPoint
    from gputop.record.writer import Recorder

    clock = [T0]
    rec = Recorder(path, clock=lambda: clock[0])
    rec.start((device(0),), {"mode": "diagnose", "pid": 7, "command": ["python", CRAFTED]})
    done: dict[int, list] = {0: [], 1: []}
    for k in range(SECONDS):
        now = T0 + k
        clock[0] = now
        rec.verdict(EvalPoint(now), _session_verdict(k))
        rec.gpu([gpu_sample(0, now, ("sw_power_cap",) if k in CAPPED else ())])
        for r in (0, 1):
            for _ in range(10):
                n = len(done[r])
                done[r].append(step(n, 10**18 + n * 100 * 10**6, SPLITS[r]))
        agents = tuple(agent(100 + r, tuple(done[r][-200:]), rank=r, world_size=2) for r in (0, 1))
        rec.agents(AgentsSample(7, now, 1.7e9 + now, agents))
        if k == 50:
            rec.event(now, 1.7e9 + now, "capture",
                      {"kind": "pyspy-flame", "pid": 7, "status": "done",
                       "folder": f"/tmp/caps/{CRAFTED}"})  # fmt: skip
    rec.close()


# ---- a small real recording, and what reading it gives ----

PID = 31337
"""The recorded job's pid in ``small_recording``'s file."""


def _small_finding(bound: str) -> Finding:
    from gputop.diagnose.findings import Evidence, Finding

    return Finding(bound, True, 0.7, f"{bound} holds", (Evidence("x 31%", "agent"),), ("try",))


def _record_small(path: Path) -> None:
    """Three minutes of fake time, a reading every 2 s: three segments (of 70 s), summaries
    every minute inside them and at their ends."""
    from gputop.diagnose.findings import Verdict
    from gputop.diagnose.point import EvalPoint
    from gputop.record import writer
    from gputop.record.writer import Recorder

    assert writer.SEGMENT_S == 70.0
    clock = [500.0]
    rec = Recorder(path, clock=lambda: clock[0])
    rec.start((device(0), device(1)), {"mode": "record", "pid": PID, "command": "python t.py"})
    done: list[StepRecord] = []
    frame = (Frame("forward", "torch/nn/modules/module.py", 1532), Frame("main", "t.py", 9))
    for i in range(92):
        now = 500.0 + 2 * i
        clock[0] = now
        point = EvalPoint(now, (("host", PID), now), (("stacks", PID), now))
        bound = "data-loading" if i < 50 else "gpu-compute"
        principal = _small_finding(bound) if i > 2 else None
        rec.verdict(point, Verdict(principal, (), (), now if principal else None, "", ("NVML",)))
        rec.gpu([
            GpuSample(g, now + 0.01, 1.7e9 + now, power_w=650.5, util_gpu_pct=90 - g,
                      sm_active_pct=80.25, temp_c=70 + i % 3,
                      reasons=("sw_power_cap",) if i % 4 == 0 else (),
                      na=M({"nvlink_tx_kibps": "not supported"}))
            for g in (0, 1)
        ])  # fmt: skip
        proc = ProcSample(PID, 1, 1, "python", "python t.py", "main", "R", 1.0, 1 << 30, None,
                          None, 4, 1, 0, (), 0.1, 10.0, 1.0, 0.0, 0.0, 0.0, 9)  # fmt: skip
        state = "exited" if i == 91 else "running"
        rec.host(HostSample(PID, now + 0.02, 1.7e9 + now, state, 0 if i == 91 else None, (proc,),
                            8.0, "affinity", 8, None, M({"OMP_NUM_THREADS": "4"})))  # fmt: skip
        for _ in range(3):
            n = len(done)
            done.append(StepRecord(n, 10**18 + n * 700 * MS, (100 + n % 7) * MS,
                                   M({"data_wait": 30 * MS, "forward": 50 * MS}),
                                   samples=64, flops=2e13))  # fmt: skip
        agent = AgentState(PID, "connected", 0, 0, 1, "h", ("python", "t.py"),
                           M({"autocast": True, "autocast_dtype": "bfloat16"}), tuple(done[-8:]),
                           None, None, 0.01, 0.1, 0, 0)  # fmt: skip
        rec.agents(AgentsSample(PID, now + 0.03, 1.7e9 + now, (agent,)))
        thread = ThreadStack(PID, "MainThread", True, frame, "forward", frame[0])
        rec.stacks(StacksSample(PID, now + 0.04, 1.7e9 + now,
                                (ProcessStacks(PID, "main", (thread,)),)))  # fmt: skip
        if i == 30:
            data = {"kind": "pyspy-flame", "pid": PID, "status": "done", "folder": "/tmp/c"}
            rec.event(now + 0.05, 1.7e9 + now, "capture", data)
    rec.close()


@dataclass(frozen=True)
class SmallRecording:
    data: bytes
    records: tuple[Record, ...]
    boundaries: frozenset[int]
    """Offsets where a frame ends (a cut there is a clean, shorter file)."""
    spans: tuple[tuple[int, int, int], ...]
    """(kind, frame start, payload start) of every frame."""
    header: dict[str, Any]
    summaries: tuple[dict[str, Any], ...]
    lines: tuple[Any, ...]
    """The first segment's records as JSON values."""


@cache
def small_recording(folder: str) -> SmallRecording:
    """The small recording written once into ``folder`` (base.gputop), and what it holds."""
    import pytest

    from gputop.record import writer
    from gputop.record.fileformat import DATA, FRAME, HEADER, NEW_STREAM, SUMMARY, Scan, frames
    from gputop.record.reader import open_recording

    path = Path(folder) / "base.gputop"
    if not path.exists():
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(writer, "SEGMENT_S", 70.0)
            _record_small(path)
    data = path.read_bytes()
    recording = open_recording(path)
    records = tuple(recording.records())
    assert recording.damage is None
    spans, summaries, lines = [], [], []
    stream, segments = zlib.decompressobj(), 0
    with path.open("rb") as f:
        for fr in frames(f, str(path), Scan()):
            spans.append((fr.kind, fr.offset, fr.offset + FRAME.size))
            if fr.kind == SUMMARY:
                summaries.append(json.loads(zlib.decompress(fr.payload)))
            segments += fr.kind == DATA and fr.flags & NEW_STREAM
            if fr.kind == DATA and segments == 1:
                lines += [json.loads(x) for x in stream.decompress(fr.payload).splitlines()]
    ends = [start for _, start, _ in spans[1:]] + [len(data)]
    kinds = [k for k, _, _ in spans]
    assert kinds.count(SUMMARY) >= 5 and kinds[0] == HEADER
    first = spans[0]
    header = json.loads(data[first[2] : ends[0]])
    return SmallRecording(
        data, records, frozenset(ends), tuple(spans), header, tuple(summaries), tuple(lines)
    )


# ---- session states one evaluation apart (armed captures' triggers) ----


def found(bound: str) -> Finding:
    from gputop.diagnose.findings import Finding

    return Finding(bound, True, 0.9, f"{bound} summary")


class States:
    """SessionStates one evaluation apart, as a session makes them."""

    def __init__(self) -> None:
        self.n = 0
        self.shifts: tuple[Any, ...] = ()

    def at(self, t: float, principal: str | None = None, since: float | None = None,
           secondary: tuple[str, ...] = (), risks: tuple[str, ...] = (),
           inputs: Any = None) -> SessionState:  # fmt: skip
        from gputop.diagnose import EvalPoint, Verdict
        from gputop.model import Timeline
        from gputop.session import SessionState

        self.n += 1
        v = Verdict(found(principal) if principal else None,
                    tuple(found(b) for b in secondary), (), since if since is not None else t,
                    risks=risks)  # fmt: skip
        return SessionState(devices=(), gpus={}, host=None, agents=None, stacks=None,
                            verdict=v, point=EvalPoint(now=t), inputs=inputs,
                            evaluations=self.n, problems=(), timeline=Timeline(),
                            shifts=self.shifts)  # fmt: skip

    def shift(self, pid: int, before: float, after: float) -> None:
        from gputop.diagnose import Mean, Shift

        s = Shift(pid, 100 + len(self.shifts), 0, before, after, Mean(before, 0.0, 64), {})
        self.shifts = (*self.shifts, (s, f"rank {pid}", 0.0))


def rank_work(slow: int | None, rows: dict[int, float]) -> Any:
    """RuleInputs as far as the straggler trigger reads them: the ranks' work and the one
    straggler by the model's definition."""
    table = [SimpleNamespace(pid=p, work_ms=w) for p, w in rows.items()]
    median = sorted(rows.values())[len(rows) // 2]
    straggler = None
    if slow is not None:
        straggler = SimpleNamespace(row=next(r for r in table if r.pid == slow),
                                    median_work_ms=median)  # fmt: skip
    work = SimpleNamespace(rows=table, straggler=straggler)
    return SimpleNamespace(steps=SimpleNamespace(rank_work=work))
