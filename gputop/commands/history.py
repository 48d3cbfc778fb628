"""`gputop history`: the jobs gputop remembers (``gputop/history``), each with its latest runs:
when, how many steps, the mean step, the verdict. What the next run of a job is compared with."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gputop.diagnose import Remembered
    from gputop.model.job_key import JobKey

NAME = "history"
HELP = "list the jobs gputop remembers, with their latest runs (what a next run is compared with)"
DESCRIPTION = (
    "Each job gputop watched (a script and its world size) with its latest runs: when, how "
    "many steps, the mean step, the verdict. A run of the same job is compared with the last "
    "one live (the change pane, `diagnose`). Kept in $XDG_STATE_HOME/gputop/jobs (else "
    "~/.local/state/gputop/jobs), private to you; --no-history or `history = false` in the "
    "config keeps a run out of it."
)
EXAMPLES = """\
examples:
  gputop history                  the jobs, the one watched last first
  gputop history --runs 10        ten runs of each
  gputop history --forget train.py    forget every job whose script is named train.py
"""
"""Shown after the flags in --help."""
RUNS_SHOWN = 3


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs", type=int, default=RUNS_SHOWN, metavar="N",
                   help=f"runs shown per job (default {RUNS_SHOWN})")  # fmt: skip
    p.add_argument("--json", action="store_true", help="the jobs and runs as JSON")
    p.add_argument("--forget", metavar="SCRIPT",
                   help="forget the jobs whose script is SCRIPT (a path or its name)")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from gputop.errors import CannotDo
    from gputop.history.store import Memory

    memory = Memory()
    try:
        jobs = memory.jobs()
        if memory.problem:
            raise CannotDo(memory.problem)
        for note in memory.notes:
            print(f"gputop: {note}", file=sys.stderr)
        if args.forget is not None:
            return _forget(memory, [k for k, _ in jobs], args.forget)
        if args.json:
            json.dump([_job_doc(k, runs) for k, runs in jobs], sys.stdout, indent=1)
            sys.stdout.write("\n")
            return 0
        if not jobs:
            print(f"no job remembered yet in {memory.root}")
            return 0
        for key, runs in jobs:
            print(runs[-1].key.title)  # with the arguments of its latest run
            print(f"  {key.script}")
            for r in reversed(runs[-max(1, args.runs) :]):
                print(f"  {_run_line(r)}")
        return 0
    finally:
        memory.close()


def _forget(memory: Any, keys: list[JobKey], script: str) -> int:
    import posixpath

    from gputop.commands.flags import UsageError

    hit = [k for k in keys if script in (k.script, posixpath.basename(k.script))]
    if not hit:
        raise UsageError(f"no remembered job runs {script!r}: `gputop history` lists them")
    for k in hit:
        memory.forget(k)
        print(f"forgot {k.title} ({k.script})")
    return 0


def _run_line(r: Remembered) -> str:
    import time

    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.started))
    step = r.run.step
    ms = f"{1000 * step.value:.3g} ms ±{1000 * 2 * step.error:.2g}" if step.steps else "no steps"
    verdict = r.principal or "no bound"
    return f"{when}  {step.steps:>7} steps  {ms:<18}  {verdict}"


def _job_doc(key: JobKey, runs: list[Remembered]) -> dict[str, Any]:
    from gputop.history.entry import key_doc, run_doc

    return {**key_doc(key), "runs": [_without_id(run_doc(r, "")) for r in runs]}


def _without_id(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k != "id"}
