"""Paths shared by tests (kept out of conftest so test modules can import them)."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import socket
import tempfile
import time
import traceback  # imported here: a child that became nobody may not read the stdlib
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(os.environ.get("GPUTOP_FIXTURES", REPO.parent / "shared" / "fixtures"))


def as_nobody(work) -> str:
    """Run ``work()`` (returning text) in a forked child that has become user ``nobody``, and
    return its text. Forking, not exec'ing: the interpreter may not be readable by nobody, and
    the code under test is already imported. Needs root."""
    import pwd

    nobody = pwd.getpwnam("nobody")
    read_fd, write_fd = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.close(read_fd)
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            os.write(write_fd, work().encode())
        except BaseException:  # the test's assertion then shows what went wrong in the child
            os.write(write_fd, traceback.format_exc().encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    raw = b""
    try:
        while chunk := os.read(read_fd, 65536):
            raw += chunk
        os.waitpid(child, 0)
    finally:
        os.close(read_fd)
    return raw.decode()


@contextlib.contextmanager
def _fresh_cgroup(controller: str, v1_files: dict[str, str], v2_files: dict[str, str]):
    """A new cgroup under ``controller`` with the given files written; yields (dir, version), or
    (None, "") when this machine cannot make one (not root, no writable controller). Removed
    afterwards, once its members have exited."""
    from gputop.sources.cgroup import parse_mountinfo

    mounts = parse_mountinfo(Path("/proc/self/mountinfo").read_text())
    v1 = next((m for m in mounts if m.fstype == "cgroup" and controller in m.options), None)
    v2 = next((m for m in mounts if m.fstype == "cgroup2"), None)
    made, version = None, ""
    try:
        if v1 is not None:
            made, version, files = v1.point / f"gputop-test-{os.getpid()}", "v1", v1_files
        elif v2 is not None:
            (v2.point / "cgroup.subtree_control").write_text(f"+{controller}")
            made, version, files = v2.point / f"gputop-test-{os.getpid()}", "v2", v2_files
        if made is not None:
            made.mkdir()
            for name, value in files.items():
                (made / name).write_text(value)
    except OSError:
        if made is not None and made.is_dir():
            made.rmdir()
        made = None
    try:
        yield made, version
    finally:
        if made is not None:
            remove_cgroup(made)  # its members (DataLoader workers outlive main ~2 s) go first


def remove_cgroup(d: Path) -> None:
    """A test's cgroup, once the kernel has let its killed processes go; one still busy after
    5 s is left behind rather than fail the test that used it."""

    def removed() -> bool:
        try:
            d.rmdir()
        except OSError:
            return False
        return True

    until_or_none(removed, timeout=5, every=0.1)


@contextlib.contextmanager
def cpu_quota_cgroup(cpus: float):
    """A fresh cgroup limited to ``cpus`` CPUs; yields its ``cgroup.procs`` path, or None when
    this machine cannot make one."""
    period = 100_000
    v1 = {"cpu.cfs_period_us": str(period), "cpu.cfs_quota_us": str(int(cpus * period))}
    v2 = {"cpu.max": f"{int(cpus * period)} {period}"}
    with _fresh_cgroup("cpu", v1, v2) as (made, _):
        yield None if made is None else made / "cgroup.procs"


class MemoryCgroup:
    """A fresh memory cgroup's knobs, the same on v1 and v2."""

    def __init__(self, path: Path, version: str) -> None:
        self.path, self.version = path, version
        self.procs = path / "cgroup.procs"

    def usage(self) -> int:
        name = "memory.usage_in_bytes" if self.version == "v1" else "memory.current"
        return int((self.path / name).read_text())

    def limit(self, n: int) -> None:
        name = "memory.limit_in_bytes" if self.version == "v1" else "memory.max"
        (self.path / name).write_text(str(n))


@contextlib.contextmanager
def memory_cgroup():
    """A fresh memory cgroup without a limit yet (no swap on v2); yields a MemoryCgroup or None
    when this machine cannot make one."""
    with _fresh_cgroup("memory", {}, {"memory.swap.max": "0"}) as (made, version):
        yield None if made is None else MemoryCgroup(made, version)


@contextlib.contextmanager
def short_dir(prefix: str):
    """A private folder with a short path, removed after: a job whose $TMPDIR or socket folder
    is under pytest's tmp_path can pass the 107 bytes a Unix socket's path may have
    (multiprocessing's resource sharer binds ``$TMPDIR/pymp-*/listener-*`` in every
    DataLoader worker; pytest's path grows with its run counter and the test's name)."""
    d = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def kill_tree(job) -> None:
    """Kill a started job and everything below it (DataLoader workers would outlive it and keep
    a cgroup busy), then reap it."""
    import psutil

    try:
        procs = [*psutil.Process(job.pid).children(recursive=True), psutil.Process(job.pid)]
    except psutil.Error:
        procs = []
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.kill()
    job.wait()


def trainer_with_workers(*knobs: str, preexec_fn=None):
    """examples/mlp_plain.py with two DataLoader workers, returned once both run."""
    import subprocess
    import sys

    import psutil

    job = subprocess.Popen(
        [sys.executable, str(REPO / "examples" / "mlp_plain.py"), "--steps", "100000",
         "--threads", "1", "--workers", "2", *knobs],
        preexec_fn=preexec_fn, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        until(lambda: len(psutil.Process(job.pid).children()) >= 2, timeout=60,
              what="the trainer's two DataLoader workers", every=0.2)  # fmt: skip
    except BaseException:
        kill_tree(job)
        raise
    return job


# ---- Prometheus: scraping gputop's exporter ----


def free_port() -> int:
    """A port nothing listens on now (bound to 0 and released: the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int) -> dict[str, Any] | None:
    """Metric families by name (prometheus-client's own text parser), or None while nothing
    listens yet."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            text = r.read().decode()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None
    return {f.name: f for f in text_string_to_metric_families(text)}


def steps_of(fams: dict[str, Any] | None) -> dict[str, float]:
    """rank -> gputop_steps_total ({} before the first step)."""
    fam = (fams or {}).get("gputop_steps")
    return {s.labels["rank"]: s.value for s in fam.samples} if fam else {}


def until(check, timeout: float = 30.0, what: str = "", every: float = 0.05):
    """Polls ``check()`` until it is true and returns its value; a timeout fails the test with
    ``what``. Every test that waits for a state waits through this (a fixed sleep passes when
    things are merely slow, or fails on a busy machine)."""
    got = until_or_none(check, timeout, every)
    assert got, f"timed out after {timeout:g} s: {what or check}"
    return got


async def until_drawn(pilot, check, timeout: float = 10.0, what: str = ""):
    """``until`` for a Textual app under Pilot: the app runs between the checks."""
    began = time.monotonic()
    while not (got := check()):
        _still_in_time(began, timeout, what or check)
        await pilot.pause(0.05)
    return got


def until_or_none(check, timeout: float = 30.0, every: float = 0.05):
    """``until`` for a wait whose timeout is no failure of its own (a best-effort cleanup, or a
    caller that fails with what it saw): ``check()``'s value, or None after ``timeout``."""
    began = time.monotonic()
    while not (got := check()):
        if time.monotonic() - began >= timeout:
            return None
        time.sleep(every)
    return got


def _still_in_time(began: float, timeout: float, what: object) -> None:
    assert time.monotonic() - began < timeout, f"timed out after {timeout:g} s: {what}"


def sample_until(source, done, timeout: float = 30.0, every: float = 0.5):
    """Samples a ``StackSource`` until ``done(sample)`` or the timeout, and returns the last
    sample: a process py-spy failed to read (a nonblocking read loses a race with a busy
    process about once in 80) is read again only after its back-off."""
    sample = source.sample()
    deadline = time.monotonic() + timeout
    while not done(sample) and time.monotonic() < deadline:
        time.sleep(every)
        sample = source.sample()
    return sample


def fuzz_examples(n: int) -> int:
    """``n`` hypothesis examples, times GPUTOP_FUZZ_SCALE (default 1): CI keeps its minutes, a
    developer hunts deeper with ``GPUTOP_FUZZ_SCALE=50 pytest tests/unit -k fuzz``."""
    try:
        scale = max(1, int(os.environ.get("GPUTOP_FUZZ_SCALE", "1")))
    except ValueError:
        scale = 1
    return n * scale


def schema_object(root: dict[str, Any], s: dict[str, Any]) -> dict[str, Any]:
    """The object schema ``s`` stands for inside ``root``: its ``$ref`` followed, the first
    alternative of a oneOf/anyOf that has properties (the others are null or a scalar)."""
    if "$ref" in s:
        return schema_object(root, root["$defs"][s["$ref"].rsplit("/", 1)[1]])
    for alt in s.get("oneOf", s.get("anyOf", [])):
        if "properties" in alt or "$ref" in alt:
            return schema_object(root, alt)
    return s


_copy: Any = None


def job_env(environ: dict[str, str]) -> dict[str, str]:
    """``environ`` as `gputop run` gives it to a job (``run.child_env``): the agent's copy first
    on its PYTHONPATH; one copy for the whole test run, removed when it ends."""
    global _copy
    from gputop.inject.agent_copy import place_for_run
    from gputop.run import child_env

    if _copy is None:
        _copy = place_for_run()
        atexit.register(lambda: (_copy.remove(), _copy.close()))
    return child_env(_copy.folder, environ)


MARGINS = os.environ.get("GPUTOP_MARGINS")
"""A file to append each live verdict test's timeline to (``note_timeline``), for measuring
its margin under load; unset in a plain run."""


def note_timeline(timeline: list[dict[str, Any]], watched_s: float) -> None:
    """Append the test's verdict timeline (diagnose's ``timeline``: each change with ``t_s``
    and ``bound``) and how long it watched to ``GPUTOP_MARGINS``: the margin is the time the
    final verdict held before the watch ended (``tests/bench/margins.py`` sums them up)."""
    if not MARGINS:
        return
    entry = {
        "test": os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" ", 1)[0],
        "watched_s": watched_s,
        "timeline": [{"t_s": e.get("t_s"), "bound": e.get("bound")} for e in timeline],
    }
    with open(MARGINS, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")


def note_figure(name: str, value: float, bound: float) -> None:
    """Append one measured figure of a live test and the bound it is held to, to
    ``GPUTOP_MARGINS`` (the margin under load is the distance between them)."""
    if not MARGINS:
        return
    entry = {"test": os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" ", 1)[0],
             "figure": name, "value": value, "bound": bound}  # fmt: skip
    with open(MARGINS, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")


def longest_blank(rows: list[str]) -> int:
    """The most consecutive empty rows of a screen's text (the room checks: a Pilot screen
    and a tmux pane alike)."""
    run = most = 0
    for row in rows:
        run = run + 1 if not row.strip() else 0
        most = max(most, run)
    return most
