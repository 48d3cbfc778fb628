"""What the live monitor costs over ssh: CPU, bytes written to the terminal, time to first frame.

Runs `gputop demo --board h100x8` on a 160x48 pseudo-terminal in 256-colour mode (TERM
xterm-256color, no COLORTERM: what tmux and most ssh sessions give), reads everything it
writes, and prints per mode:

- CPU: share of one core used by the process over the steady part of the run;
- bytes/s written to the terminal over the steady part (after the first 5 s);
- time from start to the first full frame (GPU rows and footer drawn).

btop runs the same way as a reference line when it is installed (`apt-get install btop`).
Targets (issue #3): CPU < 3 %, < 10 KB/s (--low-bandwidth < 3 KB/s), first frame < 1 s.

    python tests/bench/bench_tui.py [--seconds 60]
"""

from __future__ import annotations

import argparse
import fcntl
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time

import psutil

COLS, ROWS = 160, 48
WARMUP_S = 5.0


def run(cmd: list[str], seconds: float, ready: list[bytes]) -> dict[str, float]:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLORTERM", "NO_COLOR", "TMUX")}
    env["TERM"] = "xterm-256color"
    started = time.monotonic()
    proc = subprocess.Popen(
        cmd, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True
    )
    os.close(slave)
    proc_ps = psutil.Process(proc.pid)
    seen = b""
    first_frame = None
    total = 0
    steady_bytes = 0
    cpu_at_warmup = None
    t_warmup = None
    while True:
        now = time.monotonic()
        elapsed = now - started
        if elapsed >= seconds:
            break
        if cpu_at_warmup is None and elapsed >= WARMUP_S:
            c = proc_ps.cpu_times()
            cpu_at_warmup, t_warmup = c.user + c.system, now
        r, _, _ = select.select([master], [], [], 0.1)
        if not r:
            continue
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        total += len(chunk)
        if t_warmup is not None:
            steady_bytes += len(chunk)
        if first_frame is None:
            seen = (seen + chunk)[-200_000:]
            if all(marker in seen for marker in ready):
                first_frame = time.monotonic() - started
    c = proc_ps.cpu_times()
    cpu_end, t_end = c.user + c.system, time.monotonic()
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
    os.close(master)
    steady = (t_end - t_warmup) if t_warmup else float("nan")
    return {
        "cpu_pct": 100 * (cpu_end - (cpu_at_warmup or 0)) / steady if t_warmup else float("nan"),
        "bytes_per_s": steady_bytes / steady if t_warmup else float("nan"),
        "first_frame_s": first_frame if first_frame is not None else float("nan"),
        "total_kb": total / 1024,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60.0)
    args = ap.parse_args()
    gputop = [sys.executable, "-m", "gputop", "demo", "--board", "h100x8", "--config", os.devnull]
    ready = [b"SMact", b"Quit"]
    modes = [
        ("gputop demo h100x8 (default)", [*gputop], ready),
        ("gputop demo h100x8 --low-bandwidth", [*gputop, "--low-bandwidth"], ready),
    ]
    if shutil.which("btop"):
        modes.append(("btop (reference, default 2 s)", ["btop"], [b"cpu"]))
    print(f"{COLS}x{ROWS} pty, TERM=xterm-256color, {args.seconds:g} s per run")
    print(f"{'program':<40} {'CPU %':>6} {'bytes/s':>9} {'first frame':>12}")
    for name, cmd, markers in modes:
        r = run(cmd, args.seconds, markers)
        print(
            f"{name:<40} {r['cpu_pct']:>6.2f} {r['bytes_per_s']:>9.0f} {r['first_frame_s']:>11.2f}s"
        )
    print("targets: CPU < 3 %, < 10240 B/s (low-bandwidth < 3072 B/s), first frame < 1 s")


if __name__ == "__main__":
    main()
