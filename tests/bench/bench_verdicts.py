"""The verdict against scripts written elsewhere: every script of tests/corpus/ run both ways,
started by `gputop diagnose -- CMD` and started plainly then attached by PID (`gputop diagnose
--pid P --attach`), each on a simulated H100 that follows the job (busy while it computes).

One table: scenario, launcher, mode, expected, the final principal, seconds to the first right
verdict, and how often the principal changed after it; then the accuracy and the median time to
a right verdict.

    python tests/bench/bench_verdicts.py [--only NAME] [--mode run|attached|both]
                                         [--seconds 40]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1] / "corpus"


@dataclass(frozen=True)
class Scenario:
    """A corpus script, how it is launched, and the bounds that are right for it."""

    name: str
    argv: tuple[str, ...]
    launcher: str
    expected: frozenset[str]
    why: str = ""
    """Why more than one bound is right, when more than one is."""


SCENARIOS = (
    Scenario("healthy_mlp", ("healthy_mlp.py",), "plain", frozenset({"gpu-compute"})),
    Scenario(
        "transform_in_loop",
        ("transform_in_loop.py",),
        "plain",
        frozenset({"data-input/cpu-transform"}),
    ),
    Scenario("remote_reads", ("remote_reads.py",), "DataLoader workers", frozenset({"data-input"})),
    Scenario(
        "frequent_checkpoints", ("frequent_checkpoints.py",), "plain", frozenset({"side-work"})
    ),
    Scenario(
        "stuck_on_lock", ("stuck_on_lock.py", "--stuck-after", "8"), "plain", frozenset({"hung"})
    ),
    Scenario("ddp_healthy", ("ddp_healthy.py",), "torchrun", frozenset({"gpu-compute"})),
    Scenario(
        "ddp_rank_stalls",
        ("ddp_rank_stalls.py", "--stall-after", "8"),
        "torchrun",
        frozenset({"hung"}),
    ),
    Scenario("eval_every_n", ("eval_every_n.py",), "plain", frozenset({"side-work"})),
    Scenario(
        "spawn_straggler",
        ("spawn_straggler.py",),
        "torch.multiprocessing.spawn",
        frozenset({"straggler"}),
    ),
)


@dataclass
class Result:
    """One run of one scenario in one mode, as the table prints it."""

    scenario: Scenario
    mode: str
    final: str | None
    first_right_s: float | None
    changes_after: int
    problem: str = ""


def gputop(*args: str) -> list[str]:
    return [sys.executable, "-m", "gputop", "diagnose", "--json", "--sim-board", "h100", *args]


def judge(s: Scenario, mode: str, doc: dict) -> Result:
    timeline = doc.get("timeline") or []
    final = timeline[-1]["bound"] if timeline else None
    first = next((i for i, e in enumerate(timeline) if e["bound"] in s.expected), None)
    return Result(
        s,
        mode,
        final,
        timeline[first]["t_s"] if first is not None else None,
        len(timeline) - first - 1 if first is not None else 0,
    )


def command(s: Scenario, seconds: float) -> list[str]:
    """The script as its author starts it: plain python, or torchrun with two ranks."""
    script = [str(CORPUS / s.argv[0]), *s.argv[1:], "--seconds", str(seconds)]
    if s.launcher == "torchrun":
        port = 29600 + sum(map(ord, s.name)) % 300
        return [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                "--master-port", str(port), *script]  # fmt: skip
    return [sys.executable, *script]


def run_mode(s: Scenario, seconds: float) -> Result:
    script = command(s, seconds + 30)
    out = subprocess.run(
        gputop("--duration", str(seconds), "--", *script),
        capture_output=True, text=True, timeout=seconds + 120, cwd=CORPUS,
    )  # fmt: skip
    try:
        return judge(s, "run", json.loads(out.stdout))
    except json.JSONDecodeError:
        return Result(s, "run", None, None, 0, out.stderr.strip().splitlines()[-1:][0] or "?")


def attached_mode(s: Scenario, seconds: float) -> Result:
    script = command(s, seconds + 60)
    job = subprocess.Popen(script, cwd=CORPUS, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        time.sleep(3)  # started the way its author starts it; gputop comes later
        out = subprocess.run(
            gputop("--pid", str(job.pid), "--attach", "--duration", str(seconds)),
            capture_output=True, text=True, timeout=seconds + 120,
        )  # fmt: skip
        try:
            return judge(s, "attached", json.loads(out.stdout))
        except json.JSONDecodeError:
            last = out.stderr.strip().splitlines()[-1:] or ["?"]
            return Result(s, "attached", None, None, 0, last[0])
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()


def table(results: list[Result]) -> str:
    head = f"{'scenario':22} {'launcher':28} {'mode':9} {'expected':26} {'final':26} "
    head += f"{'right at':>9} {'changes':>7}"
    lines = [head, "-" * len(head)]
    for r in results:
        right = f"{r.first_right_s:.1f} s" if r.first_right_s is not None else "never"
        lines.append(
            f"{r.scenario.name:22} {r.scenario.launcher:28} {r.mode:9} "
            f"{'|'.join(sorted(r.scenario.expected)):26} {r.final or r.problem or '-':26} "
            f"{right:>9} {r.changes_after:>7}"
        )
    ok = [r for r in results if r.final in r.scenario.expected]
    times = [r.first_right_s for r in results if r.first_right_s is not None]
    lines.append("")
    lines.append(f"right at the end: {len(ok)} of {len(results)}")
    if times:
        lines.append(f"median time to a right verdict: {statistics.median(times):.1f} s")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", help="one scenario by name")
    ap.add_argument("--mode", choices=("run", "attached", "both"), default="both")
    ap.add_argument("--seconds", type=float, default=40.0, help="how long gputop watches each")
    args = ap.parse_args()
    chosen = [s for s in SCENARIOS if args.only in (None, s.name)]
    if not chosen:
        raise SystemExit(f"no scenario {args.only!r}: {', '.join(s.name for s in SCENARIOS)}")
    results = []
    for s in chosen:
        if args.mode in ("run", "both"):
            results.append(run_mode(s, args.seconds))
            print(f"  {s.name} run: {results[-1].final}", file=sys.stderr)
        if args.mode in ("attached", "both"):
            results.append(attached_mode(s, args.seconds))
            print(f"  {s.name} attached: {results[-1].final}", file=sys.stderr)
    print(table(results))


if __name__ == "__main__":
    main()
