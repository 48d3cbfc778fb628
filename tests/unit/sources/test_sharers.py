"""The processes outside the job that take its CPUs (``sources/sharers.py``), over a crafted
/proc: scanned only while the job waits for CPUs, measured between two scans, each named with
the job's processes whose CPUs it may share."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gputop.sources import sharers as mod
from gputop.sources.procfs import CLK_TCK
from gputop.sources.sharers import FIRST_S, KEEP_S, SharerScan


def stat(pid: int, comm: str, cpu_s: float, start: int = 1000) -> str:
    ticks = int(cpu_s * CLK_TCK)
    fields = ["S", "1", "1", "1", "0", "-1", "0", "0", "0", "0", "0", str(ticks), "0", "0", "0",
              "20", "0", "1", "0", str(start), "0", "100"] + ["0"] * 30  # fmt: skip
    return f"{pid} ({comm}) {' '.join(fields)}\n"


def write(proc: Path, pid: int, comm: str, cpu_s: float, cmd: str = "") -> None:
    d = proc / str(pid)
    d.mkdir(exist_ok=True)
    (d / "stat").write_text(stat(pid, comm, cpu_s))
    if cmd or not (d / "cmdline").exists():
        (d / "cmdline").write_bytes(cmd.replace(" ", "\0").encode())


@pytest.fixture
def proc(tmp_path: Path) -> Path:
    write(tmp_path, 100, "python", 0.0, "python train.py")  # the job's rank
    write(tmp_path, 500, "shipper", 0.0, "python ship_logs.py --to s3\x1b[2J")
    write(tmp_path, 600, "sshd", 0.0)
    (tmp_path / "self").mkdir()
    return tmp_path


def cpus_of(table: dict[int, tuple[int, ...]]):
    return lambda pid: table.get(pid)


def test_nothing_is_scanned_while_the_job_gets_its_cpus(proc, monkeypatch):
    listed = []
    real = os.listdir
    monkeypatch.setattr(mod.os, "listdir", lambda p: listed.append(p) or real(p))
    scan = SharerScan(str(proc), cpus_of({}))
    for t in range(5):
        assert scan.read({100}, set(), float(t)) == ()
    assert listed == []


def test_a_busy_process_on_the_ranks_cpu_is_named(proc):
    scan = SharerScan(str(proc), cpus_of({100: (3,), 500: (3,), 600: (0, 1)}))
    assert scan.read({100}, {100}, 0.0) == ()  # a baseline
    write(proc, 100, "python", 2.0)  # the job's own CPU never counts
    write(proc, 500, "shipper", 1.9)
    write(proc, 600, "sshd", 0.1)
    (found,) = scan.read({100}, {100}, FIRST_S)
    assert (found.pid, found.name, found.cpus, found.shares_with) == (500, "shipper", (3,), (100,))
    assert found.cores == pytest.approx(0.95, abs=0.01)
    assert found.cmdline == "python ship_logs.py --to s3?[2J"


def test_a_sharer_on_other_cpus_shares_with_no_one(proc):
    scan = SharerScan(str(proc), cpus_of({100: (3,), 500: (0, 1)}))
    scan.read({100}, {100}, 0.0)
    write(proc, 500, "shipper", 2.0)
    (found,) = scan.read({100}, {100}, FIRST_S)
    assert found.shares_with == ()


def test_the_sharers_are_forgotten_once_the_job_stops_waiting(proc):
    scan = SharerScan(str(proc), cpus_of({}))
    scan.read({100}, {100}, 0.0)
    write(proc, 500, "shipper", 2.0)
    assert scan.read({100}, {100}, FIRST_S)
    assert scan.read({100}, set(), FIRST_S + 1)  # still said for a while
    assert scan.read({100}, set(), FIRST_S + KEEP_S + 1) == ()


def test_a_crafted_stat_is_skipped(proc):
    (proc / "700").mkdir()
    (proc / "700" / "stat").write_text("garbage")
    scan = SharerScan(str(proc), cpus_of({}))
    scan.read({100}, {100}, 0.0)
    write(proc, 500, "shipper", 2.0)
    assert [x.pid for x in scan.read({100}, {100}, FIRST_S)] == [500]


def test_a_job_crowded_by_its_own_processes_is_scanned_every_scan_s_not_more(proc, monkeypatch):
    """Its ranks wait for CPUs, but no process outside the job is busy (8 ranks and their
    workers on fewer cores): after the baseline and one measuring scan, every SCAN_S."""
    listed: list[float] = []
    real = os.listdir
    scan = SharerScan(str(proc), cpus_of({}))
    clock = [0.0]
    monkeypatch.setattr(mod.os, "listdir", lambda p: listed.append(clock[0]) or real(p))
    for t in range(0, 31):
        clock[0] = float(t)
        assert scan.read({100}, {100}, float(t)) == ()
    assert listed == [0.0, 2.0, 12.0, 22.0]
