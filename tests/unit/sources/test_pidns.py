"""PID mapping over fabricated /proc trees: host view of a container, container view, plain."""

from __future__ import annotations

import os

from gputop.sources.pidns import NOT_VISIBLE, PidMapper, map_pid


def _proc(root, pid, nspid_line):
    d = root / str(pid)
    d.mkdir(parents=True)
    lines = ["Name:\tpython", f"Pid:\t{pid}"]
    if nspid_line is not None:
        lines.append(nspid_line)
    (d / "status").write_text("\n".join(lines) + "\n")


def test_process_in_a_container_seen_from_the_host(tmp_path):
    _proc(tmp_path, 41234, "NSpid:\t41234\t17")
    m = map_pid(41234, tmp_path)
    assert (m.local_pid, m.container_pid) == (41234, 17)
    assert "PID 17" in m.note


def test_same_namespace_needs_no_note(tmp_path):
    _proc(tmp_path, 500, "NSpid:\t500")
    m = map_pid(500, tmp_path)
    assert (m.local_pid, m.container_pid, m.note) == (500, None, None)


def test_host_pid_invisible_from_inside_a_container(tmp_path):
    m = map_pid(999999, tmp_path)
    assert m.local_pid is None
    assert m.note == NOT_VISIBLE
    assert "--pid=host" in m.note


def test_old_kernel_without_nspid(tmp_path):
    _proc(tmp_path, 42, None)
    assert map_pid(42, tmp_path).local_pid == 42


def test_real_proc_maps_our_own_pid():
    m = map_pid(os.getpid())
    assert m.local_pid == os.getpid()


def test_mapper_forgets_pids_that_went_away(tmp_path):
    _proc(tmp_path, 7, "NSpid:\t7\t1")
    mapper = PidMapper(tmp_path)
    assert mapper(7).container_pid == 1
    mapper.end_tick()
    (tmp_path / "7" / "status").write_text("NSpid:\t7\n")  # PID reused by another process
    assert mapper(7).container_pid == 1  # still cached within the tick it was seen
    mapper.end_tick()
    mapper.end_tick()  # not asked about for a tick: dropped
    assert mapper(7).container_pid is None
