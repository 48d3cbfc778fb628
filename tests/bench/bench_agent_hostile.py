"""What hostile or broken local clients cost a training loop that runs the agent (issue 17).

A trainer-like loop (plain Python work in phases, ``gt.step()`` per step, the agent serving its
socket) runs in a child process; this script measures its steps/s, its RSS and the agent
thread's CPU, first alone (the baseline), then with:

1. ``--idle`` clients (1000) that connect and never read;
2. ``--flooders`` clients (4) that send 64 KiB of newlines over and over (reconnecting when
   dropped);
3. ``--churn`` connections (500) opened and closed one after another: agent CPU per accept;
4. exit: ``--exit-idle`` idle clients (40) connected while the loop ends, time from the end of
   the loop to the end of the process (the agent's goodbye runs at exit).

Each figure is printed with its ratio to the baseline of the same run. Nothing is asserted:
the machine is shared. Run it against another checkout with ``PYTHONPATH=<checkout>``.

    python tests/bench/bench_agent_hostile.py [--idle 1000] [--window 3]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

TRAINER = r"""
import os, sys, time
import gputop.agent as gt
gt.init(torch_hooks=False)
print("agent_tid", gt._server._thread.native_id, flush=True)
stop = sys.argv[1]
work = int(sys.argv[2])
step = 0
last = time.monotonic()
while not os.path.exists(stop):
    with gt.FORWARD:
        s = 0
        for i in range(work):
            s += i * i
    with gt.OPTIMIZER:
        s = sum(range(work // 4))
    gt.step(samples=32)
    step += 1
    now = time.monotonic()
    if now - last >= 0.2:
        last = now
        print("steps", step, now, flush=True)
print("done", time.time(), flush=True)
"""


class Trainer:
    """The child loop, its step count as it prints it, and its /proc figures."""

    def __init__(self, agent_dir: Path, work: int) -> None:
        self.dir = agent_dir
        self.stop_flag = agent_dir.parent / "stop"
        env = {**os.environ, "GPUTOP_DIR": str(agent_dir), "PYTHONWARNINGS": "ignore"}
        self.p = subprocess.Popen(
            [sys.executable, "-c", TRAINER, str(self.stop_flag), str(work)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.steps = (0, time.monotonic())
        self.done_at: float | None = None
        self.agent_tid: int | None = None
        self.stderr = ""
        threading.Thread(target=self._read, daemon=True).start()
        self.socket = agent_dir / f"agent-{self.p.pid}.sock"
        deadline = time.monotonic() + 30
        while not self.socket.exists() or self.agent_tid is None:
            if time.monotonic() > deadline or self.p.poll() is not None:
                raise SystemExit(f"the trainer never served its socket: {self.p.stderr.read()}")
            time.sleep(0.05)

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            parts = line.split()
            if parts[0] == "steps":
                self.steps = (int(parts[1]), float(parts[2]))
            elif parts[0] == "agent_tid":
                self.agent_tid = int(parts[1])
            elif parts[0] == "done":
                self.done_at = float(parts[1])

    def rate(self, seconds: float) -> float:
        """Steps/s over the next ``seconds``, as the loop itself counts them."""
        n0, t0 = self.steps
        time.sleep(seconds)
        n1, t1 = self.steps
        return (n1 - n0) / (t1 - t0) if t1 > t0 else 0.0

    def rss_mib(self) -> float:
        with open(f"/proc/{self.p.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.p.pid}/fd"))

    def agent_cpu_s(self) -> float:
        """CPU seconds of the agent's thread (the trainer prints its id)."""
        tick = os.sysconf("SC_CLK_TCK")
        with (
            contextlib.suppress(OSError),
            open(f"/proc/{self.p.pid}/task/{self.agent_tid}/stat") as s,
        ):
            fields = s.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / tick
        return 0.0

    def finish(self) -> float:
        """Seconds from the loop's end to the process's end."""
        self.stop_flag.touch()
        self.p.wait(120)
        end = time.time()
        return end - self.done_at if self.done_at is not None else float("nan")


def connect(path: Path, timeout: float = 2.0) -> socket.socket | None:
    """A connection, waiting (up to ``timeout``) while the listen backlog is full."""
    deadline = time.monotonic() + timeout
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(str(path))
        except BlockingIOError:  # the backlog is full: an AF_UNIX connect says so at once
            s.close()
            if time.monotonic() > deadline:
                return None
            time.sleep(0.002)
            continue
        except OSError:
            s.close()
            return None
        s.settimeout(timeout)
        return s


def idle_clients(path: Path, n: int) -> list[socket.socket]:
    out = []
    for _ in range(n):
        s = connect(path)
        if s is not None:
            out.append(s)
    return out


def flooder(path: Path, stop: threading.Event, counts: dict[str, int]) -> None:
    junk = b"\n" * 65536
    while not stop.is_set():
        s = connect(path)
        if s is None:
            time.sleep(0.05)
            continue
        counts["connections"] += 1
        try:
            while not stop.is_set():
                s.sendall(junk)
                counts["bytes"] += len(junk)
        except OSError:
            pass
        finally:
            s.close()


def line(name: str, value: float, base: float, unit: str) -> None:
    ratio = value / base if base else float("nan")
    print(f"  {name:<44} {value:10.2f} {unit:<8} x{ratio:.2f} of the baseline")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--idle", type=int, default=1000)
    ap.add_argument("--flooders", type=int, default=4)
    ap.add_argument("--churn", type=int, default=500)
    ap.add_argument("--exit-idle", type=int, default=40)
    ap.add_argument("--window", type=float, default=3.0, help="seconds per measurement")
    ap.add_argument("--work", type=int, default=20000, help="loop iterations per phase")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, args.idle + 256)), hard))
    import gputop

    print(f"gputop from {Path(gputop.__file__).parent}")
    with tempfile.TemporaryDirectory(prefix="gputop-bench-") as tmp:
        t = Trainer(Path(tmp) / "agents", args.work)
        time.sleep(1.0)  # warm up
        base_rate, base_rss, base_fds = t.rate(args.window), t.rss_mib(), t.fds()
        print(f"baseline: {base_rate:.1f} steps/s, RSS {base_rss:.1f} MiB, {base_fds} fds")

        socks = idle_clients(t.socket, args.idle)
        time.sleep(1.0)
        rate, rss, fds = t.rate(args.window), t.rss_mib(), t.fds()
        print(f"{args.idle} idle clients ({len(socks)} connects went through):")
        line("steps/s", rate, base_rate, "steps/s")
        line("RSS", rss, base_rss, "MiB")
        line("trainer fds", fds, base_fds, "fds")
        for s in socks:
            s.close()
        time.sleep(1.0)

        base_rate = t.rate(args.window)  # the machine is shared: a fresh baseline
        print(f"baseline again: {base_rate:.1f} steps/s")
        stop = threading.Event()
        counts = {"connections": 0, "bytes": 0}
        threads = [
            threading.Thread(target=flooder, args=(t.socket, stop, counts), daemon=True)
            for _ in range(args.flooders)
        ]
        cpu0 = t.agent_cpu_s()
        for th in threads:
            th.start()
        time.sleep(0.5)
        rate, rss = t.rate(args.window), t.rss_mib()
        cpu = t.agent_cpu_s() - cpu0
        stop.set()
        for th in threads:
            th.join(5)
        print(
            f"{args.flooders} clients flooding newlines ({counts['bytes'] / 2**20:.0f} MiB sent,"
            f" {counts['connections']} connections, agent thread CPU {cpu:.2f} s"
            f" in {args.window + 0.5:.1f} s):"
        )
        line("steps/s", rate, base_rate, "steps/s")
        line("RSS", rss, base_rss, "MiB")
        time.sleep(1.0)

        cpu0, w0 = t.agent_cpu_s(), time.monotonic()
        for _ in range(args.churn):
            s = connect(t.socket)
            if s is not None:
                s.close()
        cpu, wall = t.agent_cpu_s() - cpu0, time.monotonic() - w0
        idle_cpu = t.agent_cpu_s()
        time.sleep(wall)
        idle_cpu = t.agent_cpu_s() - idle_cpu  # what the same stretch costs with no one
        per = max(0.0, cpu - idle_cpu) / args.churn * 1e3
        print(f"{args.churn} connect+close: agent thread CPU {per:.3f} ms per connection")

        socks = idle_clients(t.socket, args.exit_idle)
        time.sleep(0.5)
        exit_s = t.finish()
        print(f"exit with {args.exit_idle} idle clients connected: {exit_s:.2f} s after the loop")
        for s in socks:
            s.close()
    with tempfile.TemporaryDirectory(prefix="gputop-bench-") as tmp:
        t2 = Trainer(Path(tmp) / "agents", args.work)
        time.sleep(0.5)
        print(f"exit with no client: {t2.finish():.2f} s after the loop")


if __name__ == "__main__":
    main()
