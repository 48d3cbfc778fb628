"""The three CUDA loads the NVML readings are taken under, each a plain torch loop in a process
of its own (so a load that cannot start leaves its phase with one line, and the others go on).

On the simulated board (``--dry``) each is replaced by the scenario that models it
(``nvml_phases.SCENARIO_OF``): there is no CUDA to load.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import time

READY = "ready"
START_TIMEOUT_S = 60.0
"""torch's import, CUDA's start and the first iterations (a cold machine: ~10 s)."""

COMMON = """
import sys, time, torch
assert torch.cuda.is_available(), "no CUDA device"
dev = torch.device("cuda")
"""
LOADS = {
    # bf16 8192^3 matmuls back to back: tensor cores, clocks and power at their highest
    "matmul": COMMON
    + """
a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
for _ in range(3): c = a @ b
torch.cuda.synchronize(); print("ready", flush=True)
while True:
    for _ in range(20): c = a @ b
    torch.cuda.synchronize()
""",
    # an elementwise multiply over 2 GiB: DRAM at its peak, tensor cores idle
    "bandwidth": COMMON
    + """
x = torch.ones(512 * 1024 * 1024, device=dev, dtype=torch.float32)
for _ in range(3): x.mul_(1.0000001)
torch.cuda.synchronize(); print("ready", flush=True)
while True:
    for _ in range(20): x.mul_(1.0000001)
    torch.cuda.synchronize()
""",
    # one small kernel and a sync each step: utilisation high, few SMs busy
    "tiny": COMMON
    + """
x = torch.ones(256, device=dev)
torch.cuda.synchronize(); print("ready", flush=True)
while True:
    x.add_(1.0)
    torch.cuda.synchronize()
""",
}


def start(
    kind: str, python: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen | None, str]:
    """The load running (past its warm-up) and "", or None and one line saying why not."""
    proc = subprocess.Popen(
        [python, "-c", LOADS[kind]],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    deadline = time.monotonic() + START_TIMEOUT_S
    seen = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        chunk = os.read(proc.stdout.fileno(), 4096) if ready else b""
        seen += chunk
        if READY.encode() in seen:
            return proc, ""
        if proc.poll() is not None and not chunk:  # ended, and all it printed is read
            err = proc.stderr.read().decode(errors="replace").strip().splitlines()
            return None, f"the {kind} load ended before it was ready: {(err or ['?'])[-1][:200]}"
    stop(proc)
    return None, f"the {kind} load was not ready within {START_TIMEOUT_S:.0f} s"


def stop(proc: subprocess.Popen | None) -> None:
    if proc is None:
        return
    import signal

    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
