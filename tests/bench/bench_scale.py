"""What watching a job costs as the job grows: gputop's CPU (its own and its children's, py-spy
included) and memory, on process trees shaped like training jobs, against an earlier commit in
the same run.

A tree is a launcher with R ranks (RANK/LOCAL_RANK/WORLD_SIZE set, as torchrun does), each with
W DataLoader-style workers (forked, named ``pt_data_worker`` as torch names them), every process
with T threads (T-1 of them parked, like torch's pools). A rank's step is a batch from one of
its workers, 2 ms of Python and 98 ms of sleep (the GPU's share); with ``agent`` each rank
imports gputop's agent and marks its steps. Sizes are written ``RxW`` (``1`` is one process).

For each size, agent or not, mode (the headless loop ``gputop diagnose`` and the screen on a
160x48 pty) and code (this checkout, then ``--baseline``, checked out in a temporary worktree),
the monitor runs for ``--warmup`` + ``--seconds``; the figures are over the last ``--seconds``
(start-up excluded): CPU as a share of one core, split into gputop's own process and the
children it waited for (py-spy), and its resident memory at the end. The 8- and 16-rank trees
watch a simulated 8-GPU board (its sampling is part of the cost), the others one GPU.

    python tests/bench/bench_scale.py [--sizes 1,8x0,8x8,16x8] [--threads 4]
        [--modes headless,screen] [--agent both|yes|no] [--seconds 20] [--baseline HEAD~1]
        [--repeat N] [--screen 160x48] [--flags-vs "--arm"]

``--repeat N``: N pairs, this checkout and the baseline in turn (a machine that gets busier
during the run weighs on both alike), each pair printed, then each code's median and the
ratio of the medians (this / baseline).

``--flags-vs FLAGS``: instead of a baseline commit, this checkout with FLAGS on the monitor's
command line against this checkout without them (``--flags-vs "--arm"``: armed captures that
never fire against none armed, the same run).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import select
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import median

REPO = Path(__file__).resolve().parents[2]
COLS, ROWS = 160, 48
CLK_TCK = os.sysconf("SC_CLK_TCK")

TREE = r"""
import ctypes, os, subprocess, sys, threading, time

ranks, workers, threads, agent, torch_too = (int(x) for x in sys.argv[1:6])
role = os.environ.get("BENCH_ROLE", "launcher")


def park(n):
    for _ in range(n - 1):
        threading.Thread(target=threading.Event().wait, daemon=True).start()


if role == "launcher":
    kids = []
    for r in range(ranks):
        env = dict(os.environ, BENCH_ROLE="rank", RANK=str(r), LOCAL_RANK=str(r),
                   WORLD_SIZE=str(ranks), LOCAL_WORLD_SIZE=str(ranks))
        kids.append(subprocess.Popen([sys.executable, __file__, *sys.argv[1:]], env=env,
                                     stdout=subprocess.PIPE, text=True))
    for k in kids:
        assert k.stdout.readline().strip() == "ready"
    park(threads)
    print("ready", flush=True)
    for k in kids:
        k.wait()
    sys.exit(0)

# a rank (or the one process of a size-1 tree, which runs as the launcher's only rank)
if torch_too:
    import torch  # what py-spy must read through in a real rank and its forked workers
if agent:
    import gputop.agent as gt
    gt.init()
pipes = []
for _ in range(workers):
    down_r, down_w = os.pipe()
    up_r, up_w = os.pipe()
    if os.fork() == 0:
        ctypes.CDLL(None).prctl(15, b"pt_data_worker", 0, 0, 0)
        park(threads)
        while os.read(down_r, 1):
            os.write(up_w, str(sum(range(2000))).encode()[:1])
        os._exit(0)
    pipes.append((down_w, up_r))
park(threads)
print("ready", flush=True)


def work(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


step = 0
while True:
    if pipes:
        down_w, up_r = pipes[step % len(pipes)]
        if agent:
            with gt.DATA_WAIT:
                os.write(down_w, b"x")
                os.read(up_r, 1)
        else:
            os.write(down_w, b"x")
            os.read(up_r, 1)
    if agent:
        with gt.FORWARD:
            work(0.002)
            time.sleep(0.098)
        gt.step()
    else:
        work(0.002)
        time.sleep(0.098)
    step += 1
"""


@dataclass(frozen=True)
class Size:
    ranks: int
    workers: int

    @classmethod
    def parse(cls, text: str) -> Size:
        if "x" in text:
            r, w = text.split("x")
            return cls(int(r), int(w))
        if text != "1":
            raise SystemExit(f"size {text!r}: write 1 or RxW (8x8)")
        return cls(0, 0)

    def __str__(self) -> str:
        return "1" if self.ranks == 0 else f"{self.ranks}x{self.workers}"

    @property
    def processes(self) -> int:
        return 1 if self.ranks == 0 else 1 + self.ranks * (1 + self.workers)


def start_tree(
    size: Size, threads: int, agent: bool, pythonpath: str, folder: Path, torch_too: bool = True
):
    script = folder / "tree.py"
    script.write_text(TREE)
    env = dict(os.environ, PYTHONPATH=pythonpath, GPUTOP_DIR=str(folder / "run"))
    args = [str(size.ranks), str(size.workers), str(threads), str(int(agent)), str(int(torch_too))]
    if size.ranks == 0:  # one process: it is its own rank, with no launcher above it
        env["BENCH_ROLE"] = "rank"
    proc = subprocess.Popen(
        [sys.executable, str(script), *args], env=env, stdout=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    line = proc.stdout.readline().strip() if proc.stdout else ""  # ranks import torch first
    if line != "ready":
        stop(proc)
        raise SystemExit(f"the {size} tree did not start (it printed {line!r})")
    return proc


def stop(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(10)


def cpu_of(pid: int) -> tuple[float, float]:
    """(own CPU seconds, CPU seconds of the children it waited for) from /proc/P/stat."""
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    own = (int(rest[11]) + int(rest[12])) / CLK_TCK
    kids = (int(rest[13]) + int(rest[14])) / CLK_TCK
    return own, kids


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _drain(fd: int, done: threading.Event) -> None:
    while not done.is_set():
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                if not os.read(fd, 65536):
                    return
            except OSError:
                return


def watch(
    cmd: list[str],
    env: dict[str, str],
    screen: tuple[int, int] | None,
    warmup: float,
    seconds: float,
    cwd: Path,
):
    """Runs the monitor in ``cwd`` (not the checkout: `python -m` would import the package
    found there before PYTHONPATH's); returns (own %, children %, RSS MiB) over the last
    ``seconds``; ``screen``: the pty's (columns, rows) for the screen, None headless."""
    done = threading.Event()
    master = None
    if screen:
        master, slave = os.openpty()
        cols, rows = screen
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        env = {k: v for k, v in env.items() if k not in ("COLORTERM", "NO_COLOR", "TMUX")}
        env["TERM"] = "xterm-256color"
        proc = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd,
                                start_new_session=True)  # fmt: skip
        os.close(slave)
        threading.Thread(target=_drain, args=(master, done), daemon=True).start()
    else:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                                cwd=cwd, start_new_session=True)  # fmt: skip
    try:
        time.sleep(warmup)
        if proc.poll() is not None:
            err = proc.stderr.read().decode()[-400:] if proc.stderr else ""
            raise SystemExit(f"the monitor exited early ({proc.returncode}): {err}")
        t0, (own0, kids0) = time.monotonic(), cpu_of(proc.pid)
        time.sleep(seconds)
        t1, (own1, kids1) = time.monotonic(), cpu_of(proc.pid)
        rss = rss_mib(proc.pid)
    finally:
        done.set()
        stop(proc)
        if master is not None:
            os.close(master)
    span = t1 - t0
    return 100 * (own1 - own0) / span, 100 * (kids1 - kids0) / span, rss


def monitor_cmd(size: Size, pid: int, screen: bool, flags: tuple[str, ...] = ()) -> list[str]:
    board = "h100x8" if size.ranks >= 8 else "h100"
    sim = ["--sim-board", board, "--sim-scenario", "compute", *flags]
    if screen:
        return [sys.executable, "-m", "gputop", "--config", os.devnull, "--pid", str(pid), *sim]
    return [sys.executable, "-m", "gputop", "diagnose", "--pid", str(pid), "--duration", "100000",
            *sim]  # fmt: skip


def checkout(rev: str, folder: Path) -> Path:
    where = folder / "baseline"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(where), rev],
                   check=True)  # fmt: skip
    return where


def pairs(
    size: Size,
    agent: bool,
    mode: str,
    codes: list[tuple[str, str, tuple[str, ...]]],
    args: argparse.Namespace,
    pty: tuple[int, int],
    folder: Path,
) -> None:
    """``args.repeat`` runs of each code in turn, each printed; with more than one, each
    code's median and the ratio of the medians (this / baseline)."""
    runs: dict[str, list[float]] = {name: [] for name, _, _ in codes}
    for _ in range(args.repeat):
        totals = []
        for name, path, flags in codes:
            env = dict(os.environ, PYTHONPATH=path, GPUTOP_DIR=str(folder / "run"))
            tree = start_tree(size, args.threads, agent, path, folder, not args.no_torch)
            try:
                own, kids, rss = watch(
                    monitor_cmd(size, tree.pid, mode == "screen", flags), env,
                    pty if mode == "screen" else None, args.warmup, args.seconds, folder,
                )  # fmt: skip
            finally:
                stop(tree)
            totals.append(own + kids)
            runs[name].append(own + kids)
            ratio = f"{totals[0] / totals[-1]:.2f}" if len(totals) > 1 else ""
            print(
                f"{size!s:>6} {size.processes:>5} {'yes' if agent else 'no':>5} "
                f"{mode:>8} {name[:8]:>8} {own:>6.2f} {kids:>6.2f} "
                f"{own + kids:>7.2f} {rss:>8.0f} {ratio:>6}",
                flush=True,
            )
    if args.repeat > 1:
        medians = {name: median(v) for name, v in runs.items()}
        said = "  ".join(f"{name[:8]} {m:.2f}" for name, m in medians.items())
        values = list(medians.values())
        ratio = f"  ratio {values[0] / values[-1]:.2f}" if len(values) > 1 else ""
        print(f"{size!s:>6} {'yes' if agent else 'no':>5} {mode:>8} medians of "
              f"{args.repeat}: {said}{ratio}", flush=True)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1,8x0,8x8,16x8")
    ap.add_argument("--threads", type=int, default=4, help="threads per process")
    ap.add_argument("--modes", default="headless,screen")
    ap.add_argument("--agent", choices=("both", "yes", "no"), default="both")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--warmup", type=float, default=8.0)
    ap.add_argument("--baseline", default="HEAD~1", help="a git revision; 'none' to skip")
    ap.add_argument("--repeat", type=int, default=1,
                    help="pairs of this checkout and the baseline in turn; medians and their "
                         "ratio after them")  # fmt: skip
    ap.add_argument("--screen", default=f"{COLS}x{ROWS}", help="the screen's pty, COLSxROWS")
    ap.add_argument("--no-torch", action="store_true",
                    help="ranks do not import torch (py-spy reads a plain process in ~2 ms, a "
                         "torch one in ~15: the default is what a real job costs)")  # fmt: skip
    ap.add_argument("--flags-vs", metavar="FLAGS",
                    help="compare this checkout with FLAGS against it without them (not a "
                         "baseline commit)")  # fmt: skip
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat: at least 1")
    cols, _, rows = args.screen.partition("x")
    if not (cols.isdigit() and rows.isdigit()):
        ap.error(f"--screen: COLSxROWS, e.g. 120x40, not {args.screen!r}")
    pty = (int(cols), int(rows))
    sizes = [Size.parse(s) for s in args.sizes.split(",")]
    modes = args.modes.split(",")
    agents = {"both": (False, True), "yes": (True,), "no": (False,)}[args.agent]
    with tempfile.TemporaryDirectory(prefix="gputop-bench-scale-") as tmp:
        folder = Path(tmp)
        (folder / "run").mkdir(mode=0o700)
        codes: list[tuple[str, str, tuple[str, ...]]] = [("this", str(REPO), ())]
        worktree = None
        if args.flags_vs:
            flags = tuple(args.flags_vs.split())
            codes = [(" ".join(flags), str(REPO), flags), ("without", str(REPO), ())]
        elif args.baseline != "none":
            worktree = str(checkout(args.baseline, folder))
            codes.append((args.baseline, worktree, ()))
        try:
            print(f"{args.threads} threads per process, {args.warmup:g} s warm-up then "
                  f"{args.seconds:g} s measured; CPU in % of one core")  # fmt: skip
            head = f"{'size':>6} {'procs':>5} {'agent':>5} {'mode':>8} {'code':>8}"
            print(f"{head} {'own %':>6} {'kids %':>6} {'total %':>7} {'RSS MiB':>8} {'ratio':>6}")
            for size in sizes:
                for agent in agents:
                    for mode in modes:
                        pairs(size, agent, mode, codes, args, pty, folder)
        finally:
            if worktree is not None:
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force",
                                worktree], check=False)  # fmt: skip


if __name__ == "__main__":
    main()
