"""Running a corpus scenario under gputop and judging what it said: the harness the verdict
bench, the lever-savings bench and the scenario tests share (``Harness``). A job is started as its
author starts it (plain python, torchrun, accelerate, spawn; ``command``), either by `gputop
diagnose -- CMD` (``run_mode``) or on its own and attached to by PID later (``attached_mode``);
``judge`` reads diagnose's JSON against the scenario's table entry (tests/corpus/scenarios.py).

Importable with tests/ and tests/corpus/ on sys.path (the tests' conftest and the benches put
them there)."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from _clocks import ENV as CLOCKS_ENV
from _clocks import SLICES as CLOCK_SLICES
from _clocks import shares
from knobs import names_a_missing_knob
from scenarios import CORPUS, Scenario
from tests_support import free_port

from gputop.diagnose.budget import OVERDUE_S

ATTACH_DELAY = 3.0
"""Seconds a job runs on its own before gputop attaches to it (attached mode)."""


@dataclass
class Result:
    """One run of one scenario in one mode, as the table prints it."""

    scenario: Scenario
    mode: str
    final: str | None
    first_right_s: float | None
    changes_after: int
    problem: str = ""
    first_shown_s: float | None = None
    never_seen: tuple[str, ...] = ()
    timeline: tuple[tuple[float, str | None], ...] = ()
    note: str = ""
    """The verdict's note at the end (why no bound stands out, when none does)."""
    refined: int = 0
    """Changes from a right bound to a right variant of it, not counted in ``changes_after``."""
    budget: dict[str, float] | None = None
    """The job's step-time budget at the end (slice -> share), as diagnose --json gave it."""
    source: str | None = None
    """Where that budget came from (its typical rank's source: "agent" once the agent runs)."""
    problems: tuple[str, ...] = ()
    """What diagnose said it could not do (an agent that did not load among them)."""
    cause: str = ""
    """The final principal's cause line ("" without one)."""
    levers: tuple[str, ...] = ()
    """The final principal's levers, first first."""
    setup: dict | None = None
    """The job's setup as diagnose --json gave it (the levers must fit it)."""
    risks: tuple[str, ...] = ()
    """The verdict's risk lines at the end."""
    truth: dict[str, float] | None = None
    """The job's own clocks over gputop's window (_clocks.py; comms is the whole collective
    wait): what the budget is compared with; None for a script that keeps none."""

    @property
    def risk_right(self) -> bool | None:
        """A risk line names the scenario's risk (None: the scenario builds none)."""
        if not self.scenario.risk:
            return None
        return any(self.scenario.risk in r for r in self.risks)

    @property
    def cause_right(self) -> bool | None:
        """The cause line names the scenario's cause and no lever is for a kind of data the job
        lacks (None: the scenario states no cause)."""
        if not self.scenario.cause:
            return None
        foreign = any(w in x for x in self.levers for w in self.scenario.foreign)
        return self.scenario.cause in self.cause and not foreign

    def errors(self) -> list[tuple[str, float, float]]:
        """(slice, the job's clocks, gputop) for each slice the job timed or gputop measured,
        slices compared as one joined by "+" (comms+straggler: the job times a collective's
        whole wait; the scenario's ``alike``); without the job's clocks, (slice, designed,
        gputop) for each slice the scenario states."""
        got = self.budget or {}
        if self.truth is None:
            return [(n, share, got.get(n, 0.0)) for n, share in self.scenario.shares]
        groups = (("comms", "straggler"), *self.scenario.alike)
        names = {n: "+".join(g) for g in groups for n in g}
        out: dict[str, list[float]] = {}
        for n in (*CLOCK_SLICES, "straggler"):
            both = out.setdefault(names.get(n, n), [0.0, 0.0])
            both[0] += self.truth.get(n, 0.0)
            both[1] += got.get(n, 0.0)
        return [(n, c, g) for n, (c, g) in out.items() if max(c, g) >= 0.005]


@dataclass(frozen=True)
class Harness:
    """Where gputop and the jobs come from: this Python's ``-m gputop`` and this Python, or an
    install of gputop's own (its ``gputop`` command) and another environment's Python."""

    gputop: tuple[str, ...] = (sys.executable, "-m", "gputop")
    job_python: str = sys.executable

    def diagnose(self, *args: str) -> list[str]:
        """`gputop diagnose --json` on a simulated H100 that follows the job."""
        return [*self.gputop, "diagnose", "--json", "--sim-board", "h100", *args]

    def command(self, s: Scenario, seconds: float) -> list[str]:
        """The script as its author starts it: plain python (torch.multiprocessing.spawn
        scripts too, with their own --port), or torchrun with two ranks."""
        py = self.job_python
        script = [str(CORPUS / s.argv[0]), *s.argv[1:], "--seconds", str(seconds)]
        # the kernel's choice: a port fixed per scenario could be held by another run, or by
        # the last one's socket in TIME_WAIT
        port = free_port()
        if s.launcher == "torchrun":
            return [py, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                    "--master-port", str(port), *script]  # fmt: skip
        if s.launcher == "accelerate launch":
            return [py, "-m", "accelerate.commands.launch", "--multi_gpu",
                    "--num_processes", "2", "--main_process_port", str(port),
                    *script]  # fmt: skip
        if s.launcher == "torch.multiprocessing.spawn":
            script += ["--port", str(port)]
        if s.memory_mib:  # the same process, moved into a memory cgroup first
            return [py, str(CORPUS / "_memory_limit.py"), str(s.memory_mib), "--",
                    py, *script]  # fmt: skip
        return [py, *script]

    def run_mode(self, s: Scenario, seconds: float) -> Result:
        """Started by `gputop diagnose --duration SECONDS -- CMD`, judged."""
        script = self.command(s, seconds + 30)
        with tempfile.TemporaryDirectory(prefix="corpus-clocks-") as clocks:
            out = subprocess.run(
                self.diagnose("--duration", str(seconds), "--", *script),
                capture_output=True, text=True, timeout=seconds + 120, cwd=CORPUS,
                env={**os.environ, CLOCKS_ENV: clocks},
            )  # fmt: skip
            return judged(s, "run", out, clocks)

    def attached_mode(self, s: Scenario, seconds: float) -> Result:
        """Started plainly, attached to by PID ATTACH_DELAY later (`--pid P --attach`), judged."""
        script = self.command(s, seconds + 60)
        clocks = tempfile.mkdtemp(prefix="corpus-clocks-")
        job = subprocess.Popen(script, cwd=CORPUS, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True,
                               env={**os.environ, CLOCKS_ENV: clocks})  # fmt: skip
        try:
            time.sleep(ATTACH_DELAY)  # pacing: the job runs on its own before gputop attaches
            out = subprocess.run(
                self.diagnose("--pid", str(job.pid), "--attach", "--duration", str(seconds)),
                capture_output=True, text=True, timeout=seconds + 120,
            )  # fmt: skip
            return judged(s, "attached", out, clocks, lead=ATTACH_DELAY)
        finally:
            kill_job(job)
            shutil.rmtree(clocks, ignore_errors=True)

    def remove_cgroups(self) -> None:
        """The memory cgroups the scenarios ran in, once their processes are gone."""
        subprocess.run([self.job_python, str(CORPUS / "_memory_limit.py"), "--clean"],
                       check=False, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)  # fmt: skip


def judged(
    s: Scenario, mode: str, out: subprocess.CompletedProcess, clocks: str, lead: float = 0.0
) -> Result:
    """Diagnose's JSON judged (``judge``) with the job's own clocks up to now (diagnose has
    just returned), or what went wrong in one line."""
    end = time.time()
    try:
        doc = json.loads(out.stdout)
    except json.JSONDecodeError:
        return Result(s, mode, None, None, 0, last_line(out.stderr))
    return judge(s, mode, doc, lead=lead, truth=job_clocks(clocks, doc, end))


def job_clocks(where: str, doc: dict, end: float) -> dict[str, float] | None:
    """The typical rank's own clocks over the steps gputop's final budget covers: its last
    ``of.steps`` steps that ended by ``end`` (when diagnose returned); None when the job keeps
    no clocks or gputop made no budget from an agent."""
    of = (doc.get("budget") or {}).get("of") or {}
    if of.get("source") != "agent" or not of.get("steps"):
        return None
    path = os.path.join(where, f"{of['pid']}.jsonl")
    return shares(path, end, int(of["steps"]), open_after=OVERDUE_S)


def judge(
    s: Scenario, mode: str, doc: dict, lead: float = 0.0, truth: dict[str, float] | None = None
) -> Result:
    """`lead`: seconds the job ran before gputop started, so the onset in gputop's time is
    `s.onset - lead`. The right verdict counts from there: the one in force at that moment if it
    is right, else the first right change after it."""
    timeline = doc.get("timeline") or []
    final = timeline[-1]["bound"] if timeline else None
    principal = (doc.get("verdict") or {}).get("principal") or {}
    if s.cause_of:  # the finding the cause is stated for, principal or secondary
        shown = [principal, *((doc.get("verdict") or {}).get("secondary") or ())]
        principal = next((f for f in shown if f and f.get("bound") == s.cause_of), {})
    start = max(0.0, s.onset - lead)
    candidates = [e for e in timeline if e["t_s"] <= start][-1:]
    candidates += [e for e in timeline if e["t_s"] > start]
    first = next((i for i, e in enumerate(candidates) if e["bound"] in s.expected), None)
    after = candidates[first:] if first is not None else []
    pairs = itertools.pairwise(after)
    refined = sum(1 for a, b in pairs if _refines(a["bound"], b["bound"], s))
    return Result(
        s,
        mode,
        final,
        max(0.0, candidates[first]["t_s"] - start) if first is not None else None,
        max(0, len(after) - 1 - refined),
        first_shown_s=next((e["t_s"] for e in timeline if e["bound"]), None),
        never_seen=tuple(sorted({e["bound"] for e in timeline if e["bound"] in s.never})),
        timeline=tuple((e["t_s"], e["bound"]) for e in timeline),
        note=(doc.get("verdict") or {}).get("note") or "",
        refined=refined,
        budget=(doc.get("budget") or {}).get("of", {}).get("shares"),
        source=(doc.get("budget") or {}).get("of", {}).get("source"),
        problems=tuple(doc.get("problems") or ()),
        cause=((principal.get("cause") or {}).get("text") or ""),
        levers=tuple(principal.get("levers") or ()),
        setup=doc.get("setup"),
        risks=tuple((doc.get("verdict") or {}).get("risks") or ()),
        truth=truth,
    )


def _refines(old: str | None, new: str | None, s: Scenario) -> bool:
    """A right bound followed by a right variant of it (data-input, then data-input/io once the
    host readings say which resource the loader lacks): the answer sharpened, it did not flip."""
    return bool(old and new) and new.startswith(f"{old}/") and {old, new} <= s.expected


def progress(r: Result) -> str:
    """One run on one line: its final verdict (or what went wrong) and its timeline."""
    seq = " ".join(f"{t:.0f}:{b or '-'}" for t, b in r.timeline)
    note = f" ({r.note})" if r.note and not r.final else ""
    return f"  {r.scenario.name} {r.mode}: {r.final or r.problem}{note} [{seq}]"


def last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else "?"


NO_CAUSE = frozenset(
    {
        "gpu-compute",
        "memory-bandwidth",
        "idle",
        "throttled-thermal",
        "throttled-power",
        "host-memory-pressure",
    }
)
"""Final bounds that name no loss slice of the budget (the GPU's own work, its clocks, memory
that stretches every slice): the causes explain loss slices (``diagnose/causes``)."""


def unfit(r: Result) -> list[str]:
    """The final levers that turn a knob of a setup the job does not have (none is right), by
    their texts against the knob table kept apart from gputop's own declarations."""
    return [x for x in r.levers if names_a_missing_knob(x, r.setup)]


def kill_job(job: subprocess.Popen) -> None:
    """The job's session, and the torchrun ranks that left it for sessions of their own."""
    pids = descendants(job.pid)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(job.pid, signal.SIGKILL)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    job.wait()


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out
