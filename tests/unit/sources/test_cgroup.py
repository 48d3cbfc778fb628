"""The cgroup resolver over fabricated /proc and /sys/fs/cgroup trees."""

from __future__ import annotations

from pathlib import Path

from gputop.sources import cgroup as cg

PID = 4242


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def fake(tmp: Path, proc_cgroup: str, mounts: list[tuple[str, str, str, str]]) -> Path:
    """mounts: (root, mount point under tmp, fstype, super options)."""
    write(tmp / "proc" / str(PID) / "cgroup", proc_cgroup)
    lines = [
        f"{30 + i} 23 0:{40 + i} {root} {tmp / point} rw,relatime - {fstype} {fstype} {opts}"
        for i, (root, point, fstype, opts) in enumerate(mounts)
    ]
    write(tmp / "proc" / "self" / "mountinfo", "\n".join(lines) + "\n")
    return tmp / "proc"


def test_v2_nested_quotas_smallest_wins(tmp_path):
    proc = fake(tmp_path, "0::/kubepods/pod1/ctr\n", [("/", "cg", "cgroup2", "rw")])
    base = tmp_path / "cg"
    write(base / "kubepods" / "cpu.max", "max 100000\n")
    write(base / "kubepods" / "pod1" / "cpu.max", "150000 100000\n")
    write(base / "kubepods" / "pod1" / "ctr" / "cpu.max", "400000 100000\n")
    write(base / "kubepods" / "pod1" / "memory.max", "8589934592\n")
    write(base / "kubepods" / "pod1" / "ctr" / "memory.max", "max\n")
    paths = cg.resolve(PID, proc)
    assert paths.version == "v2"
    assert paths.cpu == base / "kubepods/pod1/ctr"
    q = cg.cpu_quota(paths)
    assert q.value == 1.5 and q.path == base / "kubepods/pod1"
    m = cg.memory_limit(paths)
    assert m.value == 8 << 30 and m.path == base / "kubepods/pod1"


def test_v2_without_any_limit(tmp_path):
    proc = fake(tmp_path, "0::/user.slice\n", [("/", "cg", "cgroup2", "rw")])
    write(tmp_path / "cg" / "user.slice" / "cpu.max", "max 100000\n")
    paths = cg.resolve(PID, proc)
    assert cg.cpu_quota(paths) is None and cg.memory_limit(paths) is None


def test_v1_quota_period_and_memory_no_limit_value(tmp_path):
    proc = fake(
        tmp_path,
        "4:memory:/job\n3:cpu,cpuacct:/job/step\n",
        [("/", "cpu", "cgroup", "rw,cpu,cpuacct"), ("/", "mem", "cgroup", "rw,memory")],
    )
    write(tmp_path / "cpu" / "job" / "step" / "cpu.cfs_quota_us", "-1\n")
    write(tmp_path / "cpu" / "job" / "step" / "cpu.cfs_period_us", "100000\n")
    write(tmp_path / "cpu" / "job" / "cpu.cfs_quota_us", "30000\n")
    write(tmp_path / "cpu" / "job" / "cpu.cfs_period_us", "100000\n")
    write(tmp_path / "mem" / "job" / "memory.limit_in_bytes", "9223372036854771712\n")
    paths = cg.resolve(PID, proc)
    assert paths.version == "v1"
    assert cg.cpu_quota(paths).value == 0.3
    assert cg.memory_limit(paths) is None  # the "no limit" sentinel


def test_hybrid_uses_v1_controllers_and_v2_pressure(tmp_path):
    proc = fake(
        tmp_path,
        "3:cpu:/a\n0::/a\n",
        [("/", "cpu", "cgroup", "rw,cpu"), ("/", "unified", "cgroup2", "rw")],
    )
    write(tmp_path / "cpu" / "a" / "cpu.cfs_quota_us", "200000\n")
    write(tmp_path / "cpu" / "a" / "cpu.cfs_period_us", "100000\n")
    write(
        tmp_path / "unified" / "a" / "cpu.pressure",
        "some avg10=12.50 avg60=1 total=5000000\nfull avg10=1.00 avg60=0 total=10\n",
    )
    write(
        tmp_path / "unified" / "a" / "memory.pressure", "some avg10=0.00 avg60=0 avg300=0 total=0\n"
    )
    paths = cg.resolve(PID, proc)
    assert paths.version == "hybrid"
    assert cg.cpu_quota(paths).value == 2.0
    scope, psi = cg.pressure(paths, proc)
    assert scope == "cgroup"
    assert psi["cpu"]["some_avg10"] == 12.5 and psi["cpu"]["some_total_s"] == 5.0


def test_system_pressure_when_the_cgroup_has_none(tmp_path):
    proc = fake(tmp_path, "3:cpu:/a\n", [("/", "cpu", "cgroup", "rw,cpu")])
    write(proc / "pressure" / "io", "some avg10=24.00 avg60=0 avg300=0 total=1\n")
    scope, psi = cg.pressure(cg.resolve(PID, proc), proc)
    assert scope == "system" and psi["io"]["some_avg10"] == 24.0


def test_container_mount_root_is_stripped(tmp_path):
    # inside a container without a cgroup namespace: the mount shows only /docker/abc
    proc = fake(tmp_path, "0::/docker/abc/sub\n", [("/docker/abc", "cg", "cgroup2", "rw")])
    write(tmp_path / "cg" / "cpu.max", "50000 100000\n")  # the container's own limit
    paths = cg.resolve(PID, proc)
    assert paths.cpu == tmp_path / "cg" / "sub"
    assert cg.cpu_quota(paths).value == 0.5


def test_namespace_relative_path_outside_is_explained(tmp_path):
    proc = fake(tmp_path, "0::/../../other.slice/job\n", [("/", "cg", "cgroup2", "rw")])
    paths = cg.resolve(PID, proc)
    assert paths.cpu is None
    assert any("outside gputop's cgroup namespace" in p for p in paths.problems)


def test_unreadable_proc_is_a_problem_not_an_exception(tmp_path):
    paths = cg.resolve(999, tmp_path)
    assert paths.version == "unknown" and paths.problems


def test_cpu_stat_v1_and_v2(tmp_path):
    proc = fake(tmp_path, "0::/j\n", [("/", "cg", "cgroup2", "rw")])
    write(
        tmp_path / "cg" / "j" / "cpu.stat",
        "usage_usec 2000000\nnr_periods 10\nnr_throttled 7\nthrottled_usec 500000\n",
    )
    s = cg.cpu_stat(cg.resolve(PID, proc), None)
    assert (s.nr_periods, s.nr_throttled, s.throttled_s, s.usage_s) == (10, 7, 0.5, 2.0)
    v1_mounts = [("/", "cpu", "cgroup", "rw,cpu"), ("/", "acct", "cgroup", "rw,cpuacct")]
    proc1 = fake(tmp_path / "v1", "3:cpu:/j\n2:cpuacct:/j\n", v1_mounts)
    write(
        tmp_path / "v1" / "cpu" / "j" / "cpu.stat",
        "nr_periods 4\nnr_throttled 4\nthrottled_time 3000000000\n",
    )
    write(tmp_path / "v1" / "acct" / "j" / "cpuacct.usage", "1500000000\n")
    s = cg.cpu_stat(cg.resolve(PID, proc1), None)
    assert (s.nr_throttled, s.throttled_s, s.usage_s) == (4, 3.0, 1.5)


def test_memory_working_set_and_events(tmp_path):
    proc = fake(tmp_path, "0::/j\n", [("/", "cg", "cgroup2", "rw")])
    d = tmp_path / "cg" / "j"
    write(d / "memory.current", "1000\n")
    write(d / "memory.stat", "anon 600\ninactive_file 300\n")
    write(d / "memory.events", "low 0\nhigh 2\nmax 1\noom 0\noom_kill 0\n")
    write(d / "memory.swap.current", "0\n")
    m = cg.memory_stat(cg.resolve(PID, proc), None)
    assert m.working_set == 700 and m.events["high"] == 2 and m.swap_current == 0
