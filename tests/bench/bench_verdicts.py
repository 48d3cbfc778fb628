"""The verdict against scripts written elsewhere: every script of tests/corpus/ run both ways,
started by `gputop diagnose -- CMD` and started plainly then attached by PID (`gputop diagnose
--pid P --attach`), each on a simulated H100 that follows the job (busy while it computes).

One table: scenario, launcher, mode, expected, the final principal, seconds to the first
verdict shown at all, seconds to the first right verdict (counted from the scenario's onset when
its cause starts later, such as a hang after --stuck-after), how often the principal changed
after it, and any bound the scenario must never be given (a slow job called hung); then the
accuracy and the median time to a right verdict.

    python tests/bench/bench_verdicts.py [--only NAME[,NAME...]] [--mode run|attached|both]
                                         [--seconds 40]

Scenarios run one after another: they are judged on what they do with the CPU, so two at once
on a small machine would change each other's verdicts (there is no --jobs).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "corpus"))
from scenarios import CORPUS, SCENARIOS, Scenario, by_name  # noqa: F401  (its users read it here)

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
        """(slice, designed, measured) for each slice the scenario states."""
        got = self.budget or {}
        return [(n, share, got.get(n, 0.0)) for n, share in self.scenario.shares]


GPUTOP = [sys.executable, "-m", "gputop"]
"""How gputop is started: this Python's, or (``--gputop``) an install of its own."""
JOB_PYTHON = sys.executable
"""The Python the jobs run on: this one, or (``--job-python``) another environment's."""


def gputop(*args: str) -> list[str]:
    return [*GPUTOP, "diagnose", "--json", "--sim-board", "h100", *args]


def judge(s: Scenario, mode: str, doc: dict, lead: float = 0.0) -> Result:
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
    )


def _refines(old: str | None, new: str | None, s: Scenario) -> bool:
    """A right bound followed by a right variant of it (data-input, then data-input/io once the
    host readings say which resource the loader lacks): the answer sharpened, it did not flip."""
    return bool(old and new) and new.startswith(f"{old}/") and {old, new} <= s.expected


def free_port() -> int:
    """A port nothing listens on now, for a job's rendezvous (the kernel's choice: a port fixed
    per scenario could be held by another run, or by the last one's socket in TIME_WAIT)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests_support import free_port as kernels_choice

    return kernels_choice()


def command(s: Scenario, seconds: float) -> list[str]:
    """The script as its author starts it: plain python (torch.multiprocessing.spawn scripts
    too, with their own --port), or torchrun with two ranks."""
    script = [str(CORPUS / s.argv[0]), *s.argv[1:], "--seconds", str(seconds)]
    port = free_port()
    if s.launcher == "torchrun":
        return [JOB_PYTHON, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                "--master-port", str(port), *script]  # fmt: skip
    if s.launcher == "accelerate launch":
        return [JOB_PYTHON, "-m", "accelerate.commands.launch", "--multi_gpu",
                "--num_processes", "2", "--main_process_port", str(port),
                *script]  # fmt: skip
    if s.launcher == "torch.multiprocessing.spawn":
        script += ["--port", str(port)]
    if s.memory_mib:  # the same process, moved into a memory cgroup first
        return [JOB_PYTHON, str(CORPUS / "_memory_limit.py"), str(s.memory_mib), "--",
                JOB_PYTHON, *script]  # fmt: skip
    return [JOB_PYTHON, *script]


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else "?"


def run_mode(s: Scenario, seconds: float) -> Result:
    script = command(s, seconds + 30)
    out = subprocess.run(
        gputop("--duration", str(seconds), "--", *script),
        capture_output=True, text=True, timeout=seconds + 120, cwd=CORPUS,
    )  # fmt: skip
    try:
        return judge(s, "run", json.loads(out.stdout))
    except json.JSONDecodeError:
        return Result(s, "run", None, None, 0, _last_line(out.stderr))


def attached_mode(s: Scenario, seconds: float) -> Result:
    script = command(s, seconds + 60)
    job = subprocess.Popen(script, cwd=CORPUS, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        time.sleep(ATTACH_DELAY)  # started the way its author starts it; gputop comes later
        out = subprocess.run(
            gputop("--pid", str(job.pid), "--attach", "--duration", str(seconds)),
            capture_output=True, text=True, timeout=seconds + 120,
        )  # fmt: skip
        try:
            return judge(s, "attached", json.loads(out.stdout), lead=ATTACH_DELAY)
        except json.JSONDecodeError:
            return Result(s, "attached", None, None, 0, _last_line(out.stderr))
    finally:
        kill_job(job)


def remove_cgroups() -> None:
    """The memory cgroups the scenarios ran in, once their processes are gone."""
    subprocess.run([JOB_PYTHON, str(CORPUS / "_memory_limit.py"), "--clean"], check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip


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


def _s(t: float | None) -> str:
    return f"{t:.1f} s" if t is not None else "never"


def table(results: list[Result]) -> str:
    head = f"{'scenario':26} {'launcher':27} {'mode':8} {'expected':44} {'final':24} "
    head += f"{'shown at':>8} {'right at':>8} {'changes':>7} {'refined':>7} {'budget':7} "
    head += f" {'never-bound seen':16} cause (ok: the one it is built with)"
    lines = [
        "shown at: first verdict naming a bound, seconds after gputop started; right at: first",
        "right verdict, seconds after max(gputop's start, the scenario's onset). The onset is",
        "on the script's clock, which starts after its imports (1-3 s after the process): a",
        "verdict can look that much faster than it was. changes: of what is shown, after the",
        "first right verdict; refined: of those, a right bound followed by a right variant of",
        "it (data-input, then data-input/io), not counted as changes. budget: where the job's",
        "step-time budget came from at the end (agent: the agent ran in the job).",
        "",
        head,
        "-" * len(head),
    ]
    for r in results:
        lines.append(
            f"{r.scenario.name:26} {r.scenario.launcher:27} {r.mode:8} "
            f"{'|'.join(sorted(r.scenario.expected)):44} {r.final or r.problem or '-':24} "
            f"{_s(r.first_shown_s):>8} {_s(r.first_right_s):>8} {r.changes_after:>7} "
            f"{r.refined:>7} {r.source or '-':7}  "
            f"{','.join(r.never_seen) or '-':16} {_cause_cell(r)}"
        )
    ok = [r for r in results if r.final in r.scenario.expected]
    times = [r.first_right_s for r in results if r.first_right_s is not None]
    lines.append("")
    lines.append(f"right at the end: {len(ok)} of {len(results)}")
    if times:
        lines.append(f"median time to a right verdict: {statistics.median(times):.1f} s")
    misfits = [r for r in results if unfit(r)]
    lines.append(f"runs offered a lever for a setup the job lacks: {len(misfits)}")
    for r in misfits:
        lines.append(f"  {r.scenario.name} {r.mode}: {'; '.join(unfit(r))}")
    risky = [r for r in results if r.risk_right is not None]
    if risky:
        said = sum(1 for r in risky if r.risk_right)
        lines.append(f"risk line names the built risk: {said} of {len(risky)}")
        lines += [f"  {r.scenario.name} {r.mode}: {'; '.join(r.risks) or 'no risk said'}"
                  for r in risky]  # fmt: skip
    losses = [r for r in results if r.final and r.final not in NO_CAUSE]
    named = sum(1 for r in losses if r.cause)
    lines.append(f"a cause line under a final principal that is a loss: {named} of {len(losses)}")
    lines += [f"  no cause: {r.scenario.name} {r.mode} ({r.final})" for r in losses if not r.cause]
    stated = [r for r in results if r.cause_right is not None]
    if stated:
        right = sum(1 for r in stated if r.cause_right)
        lines.append(f"cause line names the built cause: {right} of {len(stated)}")
    bad = [r for r in results if r.never_seen]
    if bad:
        lines.append(f"runs given a bound they must never get: {len(bad)}")
    return "\n".join(lines + budget_table(results))


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
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from knobs import names_a_missing_knob

    return [x for x in r.levers if names_a_missing_knob(x, r.setup)]


def _cause_cell(r: Result) -> str:
    mark = {True: "ok: ", False: "WRONG: ", None: ""}[r.cause_right]
    return f"{mark}{r.cause or '-'}"


BUDGET_ERROR = 0.10
"""Points a measured slice may differ from its designed share (issue 25: within 10)."""


def budget_table(results: list[Result]) -> list[str]:
    """Designed against measured shares, slice by slice, for the scenarios that state them."""
    rows = [r for r in results if r.scenario.shares]
    if not rows:
        return []
    out = ["", "step-time budget: designed / measured (% of wall time), error in points", ""]
    within = 0
    for r in rows:
        errs = r.errors()
        worst = max((abs(m - d) for _, d, m in errs), default=0.0)
        within += r.budget is not None and worst <= BUDGET_ERROR
        cells = "  ".join(f"{n} {round(100 * d)}/{round(100 * m)} ({100 * (m - d):+.0f})"
                          for n, d, m in errs)  # fmt: skip
        rest = ""
        if r.budget:
            compute = r.budget.get("compute", 0.0)
            rest = f"  compute {round(100 * compute)}"
        seen = cells if r.budget is not None else "no budget"
        lines_ = f"{r.scenario.name:26} {r.mode:8} {seen}{rest}"
        out.append(lines_)
    out.append("")
    out.append(f"every designed slice within {round(100 * BUDGET_ERROR)} points: {within} of "
               f"{len(rows)}")  # fmt: skip
    return out


def progress(r: Result) -> str:
    seq = " ".join(f"{t:.0f}:{b or '-'}" for t, b in r.timeline)
    note = f" ({r.note})" if r.note and not r.final else ""
    return f"  {r.scenario.name} {r.mode}: {r.final or r.problem}{note} [{seq}]"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", help="scenario names, comma-separated")
    ap.add_argument("--mode", choices=("run", "attached", "both"), default="both")
    ap.add_argument("--seconds", type=float, default=40.0, help="how long gputop watches each")
    ap.add_argument("--gputop", help="the gputop command to run (an install of its own); "
                    "default: this Python's -m gputop")  # fmt: skip
    ap.add_argument("--job-python", help="the Python the jobs run on (another environment)")
    args = ap.parse_args()
    global GPUTOP, JOB_PYTHON
    if args.gputop:
        GPUTOP = [args.gputop]
    if args.job_python:
        JOB_PYTHON = args.job_python
    names = [n.strip() for n in args.only.split(",") if n.strip()] if args.only else None
    unknown = sorted(set(names or ()) - {s.name for s in SCENARIOS})
    if unknown:
        known = ", ".join(s.name for s in SCENARIOS)
        raise SystemExit(f"no scenario {', '.join(unknown)}: {known}")
    chosen = [s for s in SCENARIOS if names is None or s.name in names]
    results = []
    for s in chosen:
        if args.mode in ("run", "both"):
            results.append(run_mode(s, args.seconds))
            print(progress(results[-1]), file=sys.stderr, flush=True)
        if args.mode in ("attached", "both"):
            results.append(attached_mode(s, args.seconds))
            print(progress(results[-1]), file=sys.stderr, flush=True)
        if s.memory_mib:
            remove_cgroups()
    print(table(results))


if __name__ == "__main__":
    main()
