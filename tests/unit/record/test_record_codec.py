"""Session files round-trip exactly: every record kind written by the Recorder decodes into
objects equal to the ones it was given, in order (floats, mappings, nested records, interned
stack frames, steps sent as deltas, repeated verdicts); a file whose header lists the fields
in another order, with more or fewer of them, still decodes by name."""

from __future__ import annotations

import dataclasses
import itertools
import json
import zlib
from pathlib import Path
from types import MappingProxyType as M
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests_support import fuzz_examples

from gputop.diagnose.findings import Evidence, Finding, Verdict
from gputop.diagnose.point import EvalPoint
from gputop.model.gpu import DeviceInfo, GpuProcess, GpuSample, MigInfo, MigSample
from gputop.model.host import CgroupSample, HostSample, ProcSample, ThreadInfo
from gputop.model.stacks import Frame, ProcessStacks, StacksSample, ThreadStack
from gputop.model.steps import AgentsSample, AgentState, StepRecord
from gputop.record import events as ev
from gputop.record import writer
from gputop.record.codec import CodecError, Schema
from gputop.record.fileformat import DATA, FORMAT_VERSION, HEADER, MAGIC, NEW_STREAM, Scan, pack
from gputop.record.fileformat import frames as file_frames
from gputop.record.reader import Record, open_recording

MS = 1_000_000
PID = 4242
WALL0 = 1_700_000_000.25
RESTART = 100
"""The reading at which rank 1's process comes back with its steps from 0."""


class Clock:
    """The recorder's clock: moved by the test, with the readings' times."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


# ---- realistic readings: every field set, varying with i (the round trips check them all) ----


def full_device(index: int) -> DeviceInfo:
    mig = ()
    if index == 1:
        mig = (MigInfo(1, 0, "MIG 1g.10gb", "MIG-abc", 7, 0, 10 << 30, M({"name": "n/a"})),)
    return DeviceInfo(
        index, "NVIDIA H100 80GB HBM3", f"GPU-{index:08x}-aaaa",
        f"00000000:{index + 0x18:02X}:00.0", 0x2330, "hopper", 1980, 1980, 2619, 700.0, 200.0,
        700.0, 80 << 30, 92, 87, 85, 95, 5, 16, None, True, index == 1, mig,
        M({"nvlink_links": "not supported on this GPU"}),
    )  # fmt: skip


def full_gpu_sample(index: int, t: float, i: int) -> GpuSample:
    if index == 1 and i == 7:
        return GpuSample(index, t, WALL0 + t, lost="the GPU fell off the bus (Xid 79)")
    throttled = i % 5 == 0
    return GpuSample(
        index, t, WALL0 + t,
        sm_clock_mhz=1755 if throttled else 1980, graphics_clock_mhz=1755, mem_clock_mhz=2619,
        power_w=0.1 + 0.2 + 600 + i / 3, power_limit_w=700.0, energy_j=1e6 + i * 650.5,
        temp_c=61 + i % 4, util_gpu_pct=97, util_mem_pct=41, mem_used_bytes=(40 << 30) + i,
        mem_reserved_bytes=512 << 20, mem_free_bytes=(39 << 30) - i,
        reasons_mask=0x4 if throttled else 0,
        reasons=("sw_power_cap",) if throttled else (),
        pcie_tx_kbps=12_000, pcie_rx_kbps=850_000, pcie_gen=5, pcie_width=16,
        nvlink_tx_kibps=None, nvlink_rx_kibps=None,
        sm_active_pct=81.5 + i / 7, sm_occupancy_pct=40.25, tensor_active_pct=33.0,
        dram_bw_pct=55.5, gpm_pcie_tx_mibps=1.5, gpm_pcie_rx_mibps=830.0,
        gpm_nvlink_tx_mibps=None, gpm_nvlink_rx_mibps=None,
        processes=(
            GpuProcess(PID, PID, None, 20 << 30, 90, 35),
            GpuProcess(777, None, 12, None, None, None, 3, 0, "not visible from this namespace"),
        ),
        mig=(MigSample(0, 1 << 30, 10 << 30, (GpuProcess(778, 778, None, 1 << 30, 5, 1),),
                       M({"processes": "not supported"})),) if index == 1 else (),
        na=M({"nvlink_tx_kibps": "not in driver 470.256.02",
              "nvlink_rx_kibps": "not in driver 470.256.02",
              "gpm_nvlink_tx_mibps": "not supported on this GPU",
              "gpm_nvlink_rx_mibps": "not supported on this GPU"}),
    )  # fmt: skip


def host_sample(t: float, i: int, exited: bool = False) -> HostSample:
    threads = (
        ThreadInfo(PID, "python", "R", 0.98),
        ThreadInfo(PID + 1, "pt_data_pin", "S", 0.01 * i),
        ThreadInfo(PID + 2, "cuda-EvtHandlr", "D", None),
    )
    main = ProcSample(
        PID, 123456, 1, "python", "python train.py --lr 3e-4", "main", "R", 1.25 + i / 3,
        3 << 30, None, None, 41, 2, 1, threads, 0.35, 1200.5, 30.0, 1e6, 0.0, 2048.0, 87,
        M({"uss_bytes": "needs same user or root", "pss_bytes": "needs same user or root"}),
    )  # fmt: skip
    worker = ProcSample(
        PID + 10, 123999, PID, "pt_data_worker", "python train.py --lr 3e-4", "worker", "S",
        0.5, 1 << 30, 200 << 20, 300 << 20, 3, 0, 0, (), None, None, None, None, None, None,
        None,
    )  # fmt: skip
    cgroup = CgroupSample(
        "v2", 7.5, "/sys/fs/cgroup/job/cpu.max", 6.1, 0.125, 0.3, 64 << 30,
        "/sys/fs/cgroup/job/memory.max", 20 << 30, 18 << 30,
        M({"low": 0, "high": 3, "max": 1, "oom": 0, "oom_kill": 0}), M({"high": i % 2}),
        None, "cgroup",
        M({"cpu": M({"some_avg10": 12.5 + i, "full_avg10": 0.0}),
           "memory": M({"some_avg10": 0.1, "full_avg10": 0.05}),
           "io": M({"some_avg10": 3.0, "full_avg10": 1.0 / 3})}),
        ("memory.stat: no such file",),
    )  # fmt: skip
    return HostSample(
        PID, t, WALL0 + t, "exited" if exited else "running", 137 if exited else None,
        () if exited else (main, worker), 7.5, "cgroup cpu.max", 16, cgroup,
        M({"CUDA_VISIBLE_DEVICES": "0,1", "OMP_NUM_THREADS": "4", "NCCL_DEBUG": "WARN"}),
        M({"affinity_cpus": "ok"}) if i % 2 else M({}),
    )  # fmt: skip


def full_step(n: int, t0_ns: int, gpu: bool = True, flops: float | None = 3.5e12) -> StepRecord:
    phases = M({"data_wait": 2 * MS + n, "h2d": MS // 2, "forward": 40 * MS + 7 * n,
                "backward": 80 * MS, "optimizer": 9 * MS})  # fmt: skip
    gpu_ns = M({"forward": 38 * MS + n, "backward": 79 * MS}) if gpu else M({})
    return StepRecord(
        n, t0_ns, 135 * MS + 13 * (n % 5), phases, gpu_ns, samples=64, tokens=None, flops=flops,
        gc_ns=0 if n % 3 else 1_250_000, gc_full=1 if n % 7 == 0 else 0,
    )  # fmt: skip


def full_agent(
    pid: int, rank: int, steps: tuple[StepRecord, ...], i: int, state: str = "connected"
):
    fingerprint = M({"autocast": False, "param_dtype": "float32",
                     "float32_matmul_precision": "high", "torch": "2.3.1",
                     "dataloader": {"num_workers": 2, "pin_memory": True},
                     "visible": ("0", "1")})  # fmt: skip
    return AgentState(
        pid, state, rank, rank, 2, "node-7", ("python", "train.py", "--lr", "3e-4"),
        fingerprint, steps, "forward" if i % 2 else None, 0.012 if i % 2 else None,
        0.05 * i, 0.2, 0, i // 4,
    )  # fmt: skip


class Steps:
    """One rank's steps as the agent reports them: the last ``keep`` steps each reading, the
    newest one's GPU times only in the next reading (CUDA events resolve a step late)."""

    def __init__(self, start_ns: int, keep: int = 6) -> None:
        self.done: list[StepRecord] = []
        self.next_t0 = start_ns
        self.keep = keep

    def advance(self, n: int) -> tuple[StepRecord, ...]:
        if self.done:  # the previous newest step's GPU times have resolved
            last = self.done[-1]
            self.done[-1] = full_step(last.step, last.t0_ns)
        for _ in range(n):
            s = full_step(len(self.done), self.next_t0, gpu=False)
            self.next_t0 += s.dur_ns + 17
            self.done.append(s)
        return tuple(self.done[-self.keep :])

    def restart(self) -> None:
        self.done = []


def frames_for(i: int) -> tuple[Frame, ...]:
    common = (Frame("forward", "torch/nn/modules/module.py", 1532),
              Frame("train_step", "train.py", 88), Frame("<module>", "train.py", None))  # fmt: skip
    if i % 3 == 0:
        return (Frame("_recv", "multiprocessing/connection.py", 430 + i % 2), *common[1:])
    return common


def stacks_sample(t: float, i: int) -> StacksSample:
    fr = frames_for(i)
    main = ProcessStacks(
        PID, "main",
        (ThreadStack(PID, "MainThread", True, fr, "forward", fr[0]),
         ThreadStack(PID + 1, "pt_data_pin", False, fr[1:], "other", None)),
        None, 0.0125,
    )  # fmt: skip
    worker = ProcessStacks(PID + 10, "worker", (), "py-spy: permission denied (run as root)")
    return StacksSample(PID, t, WALL0 + t, (main, worker), None if i else "py-spy is slow")


def finding(bound: str, conf: float) -> Finding:
    return Finding(
        bound, True, conf, f"{bound}: the step waits",
        (Evidence("data wait 31% of the step (>= 20%)", "agent"),
         Evidence("GPU util 97%", "NVML", supports=False)),
        ("DataLoader(num_workers=8)", "pin_memory=True"), ("stacks",), 0.31, ("idle",),
    )  # fmt: skip


def verdict_at(i: int, t: float) -> Verdict:
    if i < 3:
        return Verdict(None, (), (), None, "not enough data yet: 3 s of 10 s", ("NVML",))
    bound, conf = ("data-loading", 0.7) if i < 40 else ("throttled-power", 0.45)
    secondary = (finding("cpu-oversubscribed", 0.45),) if i % 20 < 10 else ()
    principal = finding(bound, conf)
    return Verdict(principal, secondary, (principal, *secondary), t - i % 40,
                   "", ("NVML", "host", "agent", "stacks"))  # fmt: skip


def record_session(path: Path, seconds: int = 150, clock: Clock | None = None) -> list[Record]:
    """A realistic session through the Recorder; the records it must read back, in order."""
    clock = clock or Clock()
    rec = writer.Recorder(path, clock=clock)
    devices = (full_device(0), full_device(1))
    rec.start(devices, {"mode": "diagnose", "pid": PID, "command": ["python", "train.py"]})
    expected: list[Record] = []
    ranks = {100: Steps(10**18), 101: Steps(10**18 + 5 * MS)}
    t0 = clock.t
    for i in range(seconds):
        now = t0 + i
        clock.t = now
        gpus = [full_gpu_sample(g, now + 0.001, i) for g in (0, 1)]
        rec.gpu(gpus)
        expected.append(Record("gpu", gpus[0].t, gpus))
        exited = i == seconds - 1
        h = host_sample(now + 0.002, i, exited=exited)
        rec.host(h)
        expected.append(Record("host", h.t, h))
        if exited:
            data = {"pid": PID, "exit_code": 137}
            expected.append(Record("event", h.t, ("target-exit", data, h.wall)))
        if i == RESTART:
            ranks[101].restart()  # the rank's process came back: its steps count from 0
        agents = []
        for pid, steps in ranks.items():
            window = steps.advance(0 if i < 2 else 1 + i % 3)
            state = "reconnecting" if pid == 101 and i == RESTART - 1 else "connected"
            agents.append(full_agent(pid, pid - 100, window, i, state))
        problems = ("rank 1: 3 malformed lines",) if i == 9 else ()
        a = AgentsSample(PID, now + 0.003, WALL0 + now, tuple(agents), problems)
        rec.agents(a)
        expected.append(Record("agents", a.t, a))
        s = stacks_sample(now + 0.004, i)
        rec.stacks(s)
        expected.append(Record("stacks", s.t, s))
        point = EvalPoint(now, (("host", PID), now), (("stacks", PID), now))
        v = verdict_at(i, now)
        rec.verdict(point, v)
        expected.append(Record("verdict", now, (point, ev.RecordedVerdict.of(v))))
        if i in (45, 46):
            data = {"id": 1, "kind": "pyspy-flame", "pid": PID,
                    "status": "done" if i == 46 else "running", "folder": "/tmp/gputop/x",
                    "reason": None, "files": ["a.svg"]}  # fmt: skip
            rec.event(now + 0.005, WALL0 + now, "capture", data)
            expected.append(Record("event", now + 0.005, ("capture", data, WALL0 + now)))
    rec.close()
    return expected


def data_lines(path: Path) -> list[list[Any]]:
    """The JSON records of each segment of ``path``, straight from the frames."""
    segments: list[list[Any]] = []
    stream: Any = None
    with path.open("rb") as f:
        for fr in file_frames(f, str(path), Scan()):
            if fr.kind != DATA:
                continue
            if fr.flags & NEW_STREAM:
                stream = zlib.decompressobj()
                segments.append([])
            text = stream.decompress(fr.payload).decode()
            segments[-1] += [json.loads(line) for line in text.splitlines()]
    return segments


# ---- round trips ----


@pytest.fixture(scope="module")
def session(tmp_path_factory) -> tuple[Path, list[Record]]:
    """150 s in segments of 70 s (summaries each minute inside them and at their ends)."""
    path = tmp_path_factory.mktemp("rec") / "session.gputop"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(writer, "SEGMENT_S", 70.0)
        return path, record_session(path)


def test_every_record_decodes_equal_to_what_was_recorded_in_order(session):
    path, expected = session
    recording = open_recording(path)
    got = list(recording.records())
    assert recording.damage is None
    assert [r.kind for r in got] == [r.kind for r in expected]
    for g, e in zip(got, expected, strict=True):
        assert g.t == e.t, e.kind
        assert g.value == e.value, (e.kind, e.t)
    assert recording.devices == (full_device(0), full_device(1))
    assert recording.session["command"] == ["python", "train.py"]
    assert recording.header["version"] == FORMAT_VERSION


def test_the_file_has_segments_frames_once_per_segment_and_repeats_as_zero(session):
    path, _ = session
    segments = data_lines(path)
    assert len(segments) == 3  # 150 s in 70 s
    for seg in segments:
        defined = [f for rec in seg if rec[0] == "F" for f in rec[1]]
        assert len(defined) == len({json.dumps(f) for f in defined}), "a frame defined twice"
        # the first stacks record of a segment defines its frames before using them
        assert seg.index(next(r for r in seg if r[0] == "F")) < seg.index(
            next(r for r in seg if r[0] == "s")
        )
        first_agents = next(r for r in seg if r[0] == "a")
        assert all(a[1][0] == "all" for a in first_agents[5]), "a segment starts from scratch"
        first_verdict = next(r for r in seg if r[0] == "v")
        assert first_verdict[2] != 0, "a segment's first verdict is written in full"
    verdicts = [r for seg in segments for r in seg if r[0] == "v"]
    assert sum(r[2] == 0 for r in verdicts) > len(verdicts) // 2
    agents = [a for seg in segments for r in seg if r[0] == "a" for a in r[5]]
    assert sum(a[1][0] != "all" for a in agents) > len(agents) * 0.9
    restart = [a for seg in segments for r in seg if r[0] == "a" and r[1] == 1000 + RESTART + 0.003
               for a in r[5]]  # fmt: skip
    assert isinstance(restart[0][1][0], int) and restart[1][1][0] == "all"


def test_steps_filled_in_a_later_reading_are_sent_as_changes(session):
    path, expected = session
    changed = [
        item
        for seg in data_lines(path)
        for r in seg
        if r[0] == "a"
        for a in r[5]
        if a[1][0] != "all"
        for item in a[1][1]
    ]
    assert changed, "no step was changed in a later reading"
    readings = [r.value for r in expected if r.kind == "agents"]
    late = [
        (old, new)
        for before, after in itertools.pairwise(readings)
        for a, b in zip(before.agents, after.agents, strict=True)
        for old in a.steps
        for new in b.steps
        if old.step == new.step and not old.gpu and new.gpu
    ]
    assert late and all(new.phases == old.phases for old, new in late)


def test_segments_can_be_read_from_their_start(session):
    path, expected = session
    recording = open_recording(path)
    later = [r for r in expected if r.t >= 1000 + 75]
    got = list(recording.records(start=1000 + 75))
    # from the start of the segment holding that time: a few records before it too
    assert got[-len(later) :] == later
    assert len(later) < len(got) < len(expected)
    assert 1000 + 70 <= got[0].t <= 1000 + 75


def test_stack_frames_are_redefined_in_each_segment_even_mid_sample(tmp_path, monkeypatch):
    # short segments: boundaries fall between the frame table and the stacks that use it
    monkeypatch.setattr(writer, "SEGMENT_S", 2.5)
    clock = Clock()
    rec = writer.Recorder(tmp_path / "f", clock=clock)
    rec.start([full_device(0)], {})
    expected = []
    for i in range(30):
        clock.t = 1000 + i * 0.75
        s = stacks_sample(clock.t, i)
        rec.stacks(s)
        expected.append(s)
    rec.close()
    recording = open_recording(tmp_path / "f")
    assert [r.value for r in recording.records()] == expected
    assert recording.damage is None
    assert len(data_lines(tmp_path / "f")) >= 6


def test_an_empty_reading_of_the_gpus_writes_nothing(tmp_path):
    rec = writer.Recorder(tmp_path / "f", clock=Clock())
    rec.start([], {})
    rec.gpu([])
    rec.close()
    assert list(open_recording(tmp_path / "f").records()) == []


# ---- another writer's field lists ----


def _encode_as(obj: Any, fields: dict[str, list[str]], extra: Any, frame_ids: dict) -> Any:
    """``obj`` in a file whose header lists ``fields``: by those names, unknown names
    written as ``extra``; stack frames by number."""
    if isinstance(obj, Frame):
        if obj not in frame_ids:
            frame_ids[obj] = len(frame_ids)
        return frame_ids[obj]
    if dataclasses.is_dataclass(obj):
        return [
            _encode_as(getattr(obj, n), fields, extra, frame_ids) if hasattr(obj, n) else extra
            for n in fields[type(obj).__name__]
        ]
    if isinstance(obj, dict | M):
        return {k: _encode_as(v, fields, extra, frame_ids) for k, v in obj.items()}
    if isinstance(obj, tuple | list):
        return [_encode_as(v, fields, extra, frame_ids) for v in obj]
    return obj


def _hand_written_file(path: Path, fields: dict[str, list[str]], records: list[Record]) -> None:
    """A recording as another gputop would write it (one segment, agents in full)."""
    extra = {"from": "the future"}
    frame_ids: dict[Frame, int] = {}
    enc = lambda o: _encode_as(o, fields, extra, frame_ids)  # noqa: E731
    lines = []
    for r in records:
        if r.kind == "gpu":
            lines.append(["g", enc(r.value)])
        elif r.kind == "host":
            lines.append(["h", enc(r.value)])
        elif r.kind == "agents":
            a = r.value
            names = fields["StepRecord"]
            agents = []
            for ag in a.agents:
                steps = [enc(s) for s in ag.steps]
                if "t0_ns" not in names:  # a writer that lost it: nothing to number from
                    steps = []
                n, t0, dur = (
                    names.index(k) if k in names else 0 for k in ("step", "t0_ns", "dur_ns")
                )
                plain = [list(e) for e in steps]
                for prev, cur in zip(plain, steps[1:], strict=False):
                    cur[n] -= prev[n]  # numbered from the step before, started from its end
                    cur[t0] -= prev[t0] + prev[dur]
                agents.append([enc(dataclasses.replace(ag, steps=())), ["all", steps]])
            lines.append(["a", a.t, a.wall, a.target, list(a.problems), agents])
        elif r.kind == "stacks":
            known = len(frame_ids)
            body = enc(r.value)
            new = sorted(frame_ids.items(), key=lambda kv: kv[1])[known:]
            if new:
                lines.append(["F", [enc_frame(f, fields) for f, _ in new]])
            lines.append(["s", body])
        elif r.kind == "verdict":
            point, v = r.value
            p = [point.now, [list(point.host[0]), point.host[1]],
                 [list(point.stacks[0]), point.stacks[1]]]  # fmt: skip
            lines.append(["v", p, [enc(v.principal), [list(s) for s in v.secondary],
                                   v.since, v.note, list(v.inputs)]])  # fmt: skip
        elif r.kind == "event":
            kind, data, wall = r.value
            lines.append(["e", r.t, wall, kind, data])
    lines.append(["x-newer-record", 1, 2, 3])  # a record type this gputop does not know
    header = {"format": "gputop.recording", "version": FORMAT_VERSION, "gputop_version": "9.9",
              "t0": 1000.0, "session": {}, "fields": fields,
              "devices": [enc(full_device(0))], "something_new": [1, 2]}  # fmt: skip
    z = zlib.compressobj()
    text = "".join(json.dumps(line) + "\n" for line in lines).encode()
    body = z.compress(text) + z.flush(zlib.Z_SYNC_FLUSH)
    path.write_bytes(
        MAGIC
        + pack(HEADER, 0, 1000.0, json.dumps(header).encode())
        + pack(DATA, NEW_STREAM, 1000.0, body)
    )


def enc_frame(f: Frame, fields: dict[str, list[str]]) -> list[Any]:
    return [getattr(f, n) if hasattr(f, n) else None for n in fields["Frame"]]


def _short_session(tmp_path: Path) -> list[Record]:
    """A few seconds of every record kind (no lost GPU: that reading has few fields)."""
    return [r for r in record_session(tmp_path / "orig", seconds=12) if r.t < 1011]


def test_a_header_with_reordered_and_extra_fields_decodes_by_name(tmp_path):
    records = _short_session(tmp_path)
    ours = Schema().header()
    fields = {}
    for i, (cls, names) in enumerate(sorted(ours.items())):
        names = list(reversed(names)) if i % 2 else names[1:] + names[:1]
        names.insert(len(names) // 2, f"added_in_a_newer_gputop_{i}")
        fields[cls] = names
    fields["Unknown"] = ["a", "b"]
    _hand_written_file(tmp_path / "f", fields, records)
    recording = open_recording(tmp_path / "f")
    got = list(recording.records())
    assert recording.damage is None
    assert got == records
    assert recording.devices == (full_device(0),)


def test_a_header_without_newer_fields_gives_their_defaults(tmp_path):
    """An older writer: fields with defaults missing, a required field missing (None)."""
    records = _short_session(tmp_path)
    fields = Schema().header()
    dropped = {"GpuSample": ["tensor_active_pct", "mig", "na"],
               "StepRecord": ["gc_ns", "gc_full", "gpu"],
               "HostSample": ["affinity_cpus"], "Finding": ["explains", "impact"],
               "ProcessStacks": ["dump_s"]}  # fmt: skip
    for cls, names in dropped.items():
        fields[cls] = [n for n in fields[cls] if n not in names]
    _hand_written_file(tmp_path / "f", fields, records)

    def older(obj: Any) -> Any:
        if isinstance(obj, Frame) or not dataclasses.is_dataclass(obj):
            if isinstance(obj, tuple | list):
                return type(obj)(older(x) for x in obj)
            return obj
        kw = {}
        for f in dataclasses.fields(obj):
            v = getattr(obj, f.name)
            if f.name in dropped.get(type(obj).__name__, ()):
                if f.default is not dataclasses.MISSING:
                    v = f.default
                elif f.default_factory is not dataclasses.MISSING:
                    v = f.default_factory()
                else:
                    v = None
            kw[f.name] = older(v)
        return type(obj)(**kw)

    recording = open_recording(tmp_path / "f")
    got = list(recording.records())
    assert recording.damage is None
    assert [r.kind for r in got] == [r.kind for r in records]
    for g, r in zip(got, records, strict=True):
        want = r.value
        if r.kind == "verdict":
            point, v = want
            want = (point, older(v))
        elif r.kind != "event":
            want = older(want)
        assert g.value == want, r.kind
    assert next(g for g in got if g.kind == "host").value.affinity_cpus is None
    assert next(g for g in got if g.kind == "gpu").value[0].na == {}


@pytest.mark.parametrize(
    ("cls", "drop", "says"),
    [
        ("GpuSample", None, "no field list for GpuSample"),
        ("GpuSample", "t", "GpuSample records have no t"),
        ("StepRecord", "t0_ns", "StepRecord records have no t0_ns"),
        ("HostSample", "processes", "HostSample records have no processes"),
    ],
)
def test_a_header_without_what_the_records_need_is_refused_in_one_line(tmp_path, cls, drop, says):
    """A required field that cannot be None (a time, a step's start) or a whole class."""
    from gputop.record.reader import RecordingError

    fields = Schema().header()
    if drop is None:
        del fields[cls]
    else:
        fields[cls].remove(drop)
    body = json.dumps({"format": "gputop.recording", "version": 1, "t0": 1.0, "fields": fields,
                       "devices": []}).encode()  # fmt: skip
    (tmp_path / "a").write_bytes(MAGIC + pack(HEADER, 0, 1.0, body))
    with pytest.raises(RecordingError, match=says) as e:
        open_recording(tmp_path / "a")
    assert str(tmp_path / "a") in str(e.value) and "\n" not in str(e.value)


def test_a_required_field_that_may_be_none_is_none_when_the_file_lacks_it(tmp_path):
    records = _short_session(tmp_path)
    fields = Schema().header()
    fields["HostSample"].remove("effective_cpus")  # float | None, no default
    _hand_written_file(tmp_path / "f", fields, records)
    got = list(open_recording(tmp_path / "f").records())
    hosts = [r.value for r in got if r.kind == "host"]
    assert hosts and all(h.effective_cpus is None for h in hosts)
    want = [dataclasses.replace(r.value, effective_cpus=None) for r in records if r.kind == "host"]
    assert hosts == want


# ---- steps as deltas ----


def _steps(numbers: range, gpu: bool = True) -> tuple[StepRecord, ...]:
    return tuple(full_step(n, 10**18 + n * 200 * MS, gpu=gpu) for n in numbers)


@pytest.mark.parametrize(
    ("prev", "cur", "shape"),
    [
        (None, _steps(range(5)), "all"),
        (_steps(range(5)), (), "all"),
        ((), _steps(range(3)), [0, 0, 3]),
        (_steps(range(5)), _steps(range(5)), [0, 0, 0]),
        (_steps(range(5)), _steps(range(2, 8)), [2, 0, 3]),
        (_steps(range(5)), _steps(range(5, 8)), "all"),  # no overlap: nothing to keep
        (_steps(range(5)), _steps(range(9, 12)), "all"),  # a gap
        (_steps(range(10, 15)), _steps(range(3)), "all"),  # the agent restarted
        (_steps(range(5)), _steps(range(3)), "all"),  # restarted, fewer steps than before
        (_steps(range(5)), _steps(range(1, 3)), "all"),  # fewer steps than kept: not a delta
    ],
)
def test_steps_delta_shapes(prev, cur, shape):
    delta = ev.steps_delta(prev, cur)
    if shape == "all":
        assert delta == ["all", list(cur)]
    else:
        drop, changed, added = delta
        assert [drop, len(changed), len(added)] == shape
    assert _round_trip(prev, delta) == cur


def test_steps_delta_sends_a_step_whose_gpu_times_arrived_as_a_change():
    prev = _steps(range(4)) + _steps(range(4, 5), gpu=False)
    cur = _steps(range(2, 7))
    drop, changed, added = ev.steps_delta(prev, cur)
    assert drop == 2
    assert changed == [[2, cur[2]]]
    assert added == list(cur[3:])
    assert _round_trip(prev, [drop, changed, added]) == cur


def _round_trip(prev, delta) -> tuple[StepRecord, ...]:
    """The delta through JSON as the file holds it, applied to ``prev``."""
    schema = Schema()
    raw = json.loads(json.dumps(ev._enc_steps(delta, schema)))
    return ev.apply_steps(prev, raw, schema.decoder(schema.header()))


@pytest.mark.parametrize(
    "raw",
    [
        "all",
        [],
        ["all"],
        [9, [], []],  # drops more steps than there were
        [-1, [], []],
        [0, [[7, None]], []],  # changes a step that is not there
        [0, [[0]], []],
        [0, "x", []],
        [0, [], "x"],
        [True, [], []],
        ["all", [[0, 1, 2]]],
        ["all", [None]],
    ],
)
def test_apply_steps_rejects_what_does_not_fit(raw):
    schema = Schema()
    dec = schema.decoder(schema.header())
    with pytest.raises(CodecError):
        ev.apply_steps(_steps(range(3)), raw, dec)


def test_apply_steps_without_a_previous_reading_takes_only_all():
    schema = Schema()
    dec = schema.decoder(schema.header())
    with pytest.raises(CodecError):
        ev.apply_steps(None, [0, [], []], dec)
    full = json.loads(json.dumps(ev._enc_steps(["all", list(_steps(range(3)))], schema)))
    assert ev.apply_steps(None, full, dec) == _steps(range(3))
    assert full[1][1][0] == 1, "steps after the first are numbered from the one before"


@settings(max_examples=fuzz_examples(60), deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 4), st.integers(0, 6), st.booleans(), st.booleans()),
        min_size=1,
        max_size=12,
    )
)
def test_agents_readings_round_trip_through_deltas(moves):
    """Random agent histories (steps advance, resolve late, drop out, restart) decode equal."""
    schema = Schema()
    enc, dec = ev.AgentsEncoder(schema), ev.AgentsDecoder(schema.decoder(schema.header()))
    steps = Steps(10**18, keep=5)
    for i, (n, keep, restart, resolve) in enumerate(moves):
        if restart:
            steps.restart()
        steps.keep = keep
        window = steps.advance(n) if resolve or not steps.done else tuple(steps.done[-keep:])
        if keep == 0:
            window = ()
        sample = AgentsSample(PID, float(i), WALL0 + i, (full_agent(100, 0, window, i),))
        raw = json.loads(json.dumps(enc.encode(sample)))
        assert dec.decode(raw) == sample
