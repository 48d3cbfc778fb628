"""The py-spy capture kinds: a flame graph of the whole tree over S seconds, and a dump of every
process and thread now. Both nonblocking: py-spy reads the target's memory without pausing it
(blocking record slowed a 159-thread torch job 5-15x: docs/facts/capture.md, "Blocking record
on many threads")."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from gputop.capture.external import ToolRun, run_tool
from gputop.capture.flamegraph import merge, render
from gputop.capture.folder import FileEntry, Folder
from gputop.capture.manifest import CaptureTarget, Manifest, Progress, Tool
from gputop.render.stacks import dump_text
from gputop.snapshot import jsonable
from gputop.sources.procfs import start_ticks
from gputop.sources.stacks import NO_PY_SPY, PySpy, StackSource, explain, find_py_spy

FLAME_SECONDS = 10.0
FLAME_SECONDS_MAX = 120.0
FLAME_RATE = 50
FLAME_RATE_MAX = 200
FLAME_MAX_BYTES = 200 * 2**20
DUMP_MAX_BYTES = 50 * 2**20
OVERRUN_S = 10.0
"""py-spy gets this long past the window before it is stopped."""


def with_versions(pid: int, targets: tuple[CaptureTarget, ...]) -> tuple[CaptureTarget, ...]:
    """Python and torch versions (and ranks) from the agents in the tree, when there are any:
    py-spy itself does not say. A quick look, no waiting for agents that are not there."""
    from gputop.sources.agent_link import AgentLink

    link = AgentLink(pid)
    try:
        sample = link.sample()  # connects; hello and fingerprint arrive soon after
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            hellos = dict(link.connected())
            if all(h.get("python") for h in hellos.values()) and all(
                a.fingerprint.get("torch") for a in sample.agents
            ):
                break  # (a process without torch keeps us the whole second: fine)
            time.sleep(0.05)
            sample = link.sample()
        hellos = dict(link.connected())
    except OSError:
        return targets
    finally:
        link.close()
    torch = {a.pid: a.fingerprint.get("torch") for a in sample.agents}
    out = []
    for t in targets:
        hello = hellos.get(t.pid)
        if hello is None:
            out.append(t)
            continue
        version = torch.get(t.pid)
        out.append(replace(t, rank=hello.get("rank"), python=hello.get("python"),
                           torch=version if isinstance(version, str) else None))  # fmt: skip
    return tuple(out)


def _version(binary: str) -> str | None:
    run = run_tool([binary, "--version"], timeout=5)
    return run.stdout.strip() or None


RECORDING = "pyspy.speedscope.json"
"""The flame capture's recording; py-spy writes it as RECORDING.partial until it ends."""


def flame(
    m: Manifest,
    folder: Folder,
    pid: int,
    seconds: float,
    rate: int,
    max_bytes: int,
    cancel: threading.Event,
    progress: Callable[[Progress], None] = lambda p: None,
) -> Manifest:
    """``py-spy record`` of ``pid`` and its subprocesses as speedscope JSON, and an SVG drawn
    from the same samples. py-spy writes through the held folder's descriptor (passed to it,
    ``/proc/self/fd/N/...``): no folder name is looked up on the way."""
    binary = find_py_spy()
    if binary is None:
        return m.ended("failed", NO_PY_SPY)
    ticks = start_ticks(pid)
    if ticks is None:
        return m.ended("failed", f"pid {pid} is not running")
    tmp = RECORDING + ".partial"
    argv = _record_argv(binary, pid, seconds, rate, folder.tool_path(tmp))
    tool = Tool("py-spy", _version(binary), tuple(argv))
    tree = StackSource(pid).tree()  # the processes --subprocesses will follow, as they are now
    targets = with_versions(pid, tuple(CaptureTarget(p, r, start_ticks(p)) for p, r in tree))
    m = replace(m, tool=tool, targets=targets)
    result, took = _record(argv, seconds, cancel, folder.fd, progress)
    tool = Tool("py-spy", tool.version, tool.argv, result.stderr_tail)
    if result.not_found:
        return m.ended("failed", NO_PY_SPY, tool=tool)
    # py-spy ends a recording early only when the target is gone (it may still be exiting)
    short = took < seconds - 1.5 and not result.cancelled and not result.timed_out
    exited = short or start_ticks(pid) != ticks
    if not folder.size(tmp):
        folder.remove(tmp)
        return m.ended(*_nothing_recorded(result, exited, pid), tool=tool)
    folder.rename(tmp, RECORDING)
    kept = _draw(folder, pid, took, max_bytes)
    if kept.failure is not None:
        return m.ended(*kept.failure, tool=tool, files=kept.files)
    status, reason = _ending(result, exited, took, seconds, pid)
    targets = tuple(replace(t, status=status) for t in m.targets)
    return m.ended(status, reason, tool=tool, files=kept.files, targets=targets)


def _record_argv(binary: str, pid: int, seconds: float, rate: int, output: str) -> list[str]:
    """The whole tree (--subprocesses), idle threads too, without pausing the target
    (--nonblocking: blocking slowed a many-threaded job 5-15x)."""
    return [binary, "record", "--pid", str(pid), "--duration", str(max(1, round(seconds))),
            "--rate", str(rate), "--format", "speedscope", "--idle", "--nonblocking",
            "--subprocesses", "--output", output]  # fmt: skip


def _record(
    argv: list[str],
    seconds: float,
    cancel: threading.Event,
    fd: int,
    progress: Callable[[Progress], None],
) -> tuple[ToolRun, float]:
    """py-spy run to its end, and how long it took, with ``progress`` told the seconds every
    half second: py-spy itself says nothing until it is done."""
    started = time.monotonic()
    done = threading.Event()

    def tick() -> None:
        while not done.wait(0.5):
            progress(Progress(min(seconds, time.monotonic() - started), seconds, "s"))

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        result = run_tool(argv, timeout=seconds + OVERRUN_S, cancel=cancel, pass_fds=(fd,))
    finally:
        done.set()
    return result, time.monotonic() - started


def _nothing_recorded(result: ToolRun, exited: bool, pid: int) -> tuple[str, str]:
    """Status and reason of a recording that left no samples, told from how py-spy ended."""
    if result.cancelled:
        return "cancelled", "cancelled before py-spy wrote anything"
    reason = (
        f"pid {pid} exited before py-spy wrote anything"
        if exited
        else explain(result.stderr_tail, result.returncode, pid)
    )
    return ("timeout" if result.timed_out else "failed"), reason


@dataclass(frozen=True)
class _Kept:
    """The files a recording left, and the status and reason when no SVG could be drawn."""

    files: tuple[FileEntry, ...]
    failure: tuple[str, str] | None = None


def _draw(folder: Folder, pid: int, took: float, max_bytes: int) -> _Kept:
    """flame.svg drawn from the recording, read only once it is known to be under the byte
    cap: a larger one is kept without an SVG, and so is one that is not JSON."""
    files = (folder.entry(RECORDING),)
    size = files[0].bytes
    if size > max_bytes:
        reason = (
            f"the recording is {size / 2**20:.0f} MiB, over the {max_bytes / 2**20:.0f} MiB "
            "cap: kept, no SVG drawn; record fewer seconds or a lower rate"
        )
        return _Kept(files, ("partial", reason))
    try:
        doc = json.loads(folder.read(RECORDING))
    except (OSError, ValueError):
        return _Kept(files, ("failed", "py-spy's output is not JSON"))
    svg = render(merge(doc), f"pid {pid} and its subprocesses, {took:.0f} s").encode()
    folder.write("flame.svg", svg)
    return _Kept((*files, folder.entry("flame.svg")))


def _ending(
    result: ToolRun, exited: bool, took: float, seconds: float, pid: int
) -> tuple[str, str]:
    """Status and reason of a recording that was drawn: cancelled, cut short by the target's
    exit or by py-spy's time limit, else ok; what was recorded is kept in every case."""
    if result.cancelled:
        return "cancelled", f"cancelled after {took:.0f} s; kept what was recorded"
    if exited:
        return "partial", (
            f"pid {pid} exited during the capture, after {took:.0f} of {seconds:g} s; kept "
            "what was recorded"
        )
    if result.timed_out:
        return "timeout", f"py-spy did not finish within {seconds + OVERRUN_S:g} s"
    return "ok", ""


def dump(m: Manifest, folder: Folder, pid: int, max_bytes: int, native: bool = False) -> Manifest:
    """Every process and thread of the tree now, as text and JSON (phases classified);
    ``native``: with C/C++ frames, each process paused while it is read."""
    spy = PySpy()
    if spy.binary is None:
        return m.ended("failed", NO_PY_SPY)
    ticks = start_ticks(pid)
    if ticks is None:
        return m.ended("failed", f"pid {pid} is not running")
    source = StackSource(pid, spy=spy)
    results, targets, used, capped = [], [], 0, False
    for p, role in source.tree():
        if capped:
            targets.append(
                CaptureTarget(p, role, start_ticks(p), status="skipped", note="byte cap")
            )
            continue
        threads, error, note = spy.dump_for_keeps(p, native)
        results.append((p, role, threads, error))
        used += len(dump_text([(p, role, threads, error)]))
        capped = used > max_bytes
        status = "failed" if error else "ok"
        targets.append(CaptureTarget(p, role, start_ticks(p), status=status, note=error or note))
    flag = "--native" if native else "--nonblocking"
    tool = Tool("py-spy", _version(spy.binary), (spy.binary, "dump", "--json", flag))
    folder.write("stacks.txt", dump_text(results).encode())
    doc = [
        {"pid": p, "role": role, "error": error, "threads": jsonable(threads or [])}
        for p, role, threads, error in results
    ]
    folder.write("stacks.json", json.dumps(doc, indent=1).encode())
    files = (folder.entry("stacks.txt"), folder.entry("stacks.json"))
    ok = [t for t in targets if t.status == "ok"]
    if capped:
        status, reason = "partial", f"stopped at the {max_bytes / 2**20:g} MiB cap"
    elif not ok:
        status, reason = "failed", targets[0].note if targets else f"pid {pid} has exited"
    elif len(ok) < len(targets):
        status, reason = "partial", f"{len(targets) - len(ok)} of {len(targets)} processes failed"
    else:
        status, reason = "ok", ""
    targets = list(with_versions(pid, tuple(targets)))
    return m.ended(status, reason, tool=tool, targets=tuple(targets), files=files)
