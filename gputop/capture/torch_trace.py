"""The capture kinds the agent runs (torch-trace, memory-snapshot), from the monitor's side: ask
every agent in the target's tree (every rank) for its capture over N steps into one folder,
wait for their answers, describe the files. The agents do the work on their training threads
(gputop/agent/trace.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace

from gputop.capture.folder import CaptureError, Folder, plain
from gputop.capture.manifest import CaptureTarget, Manifest, Progress, Tool
from gputop.sources.agent_link import AgentLink
from gputop.sources.procfs import start_ticks

STEPS = {"torch-trace": 3, "memory-snapshot": 5}
STEPS_MAX = 20
MAX_BYTES = {"torch-trace": 500 * 2**20, "memory-snapshot": 1024 * 2**20}
TOOLS = {"torch-trace": "torch.profiler", "memory-snapshot": "torch.cuda.memory"}
WAIT_S = 120.0
"""No answer within this long: the job is not reaching step boundaries (stuck, or very slow)."""
CONNECT_S = 5.0
NO_AGENT = (
    "no gputop agent in pid {pid}'s process tree: this capture needs one (start the job with "
    "`gputop run -- CMD` or `import gputop.agent; gputop.agent.init()`); a py-spy flame graph "
    "works without it"
)


def _connect(pid: int, link: AgentLink) -> list[tuple[int, dict]]:
    deadline = time.monotonic() + CONNECT_S
    while True:
        link.sample()
        agents = link.connected()
        if agents or time.monotonic() >= deadline:
            return agents
        time.sleep(0.2)


def trace(
    m: Manifest,
    folder: Folder,
    pid: int,
    steps: int,
    max_bytes: int,
    cancel: threading.Event,
    progress: Callable[[Progress], None] = lambda p: None,
    link: AgentLink | None = None,
    wait_s: float = WAIT_S,
    kind: str = "torch-trace",
    options: dict[str, bool] | None = None,
    only: frozenset[int] | None = None,
) -> Manifest:
    """``only``: the ranks (pids) to capture, of those with an agent (None: every one)."""
    link = link or AgentLink(pid)
    try:
        agents = _connect(pid, link)
        if only is not None and any(p in only for p, _ in agents):
            agents = [(p, hello) for p, hello in agents if p in only]
        if not agents:
            raise CaptureError(NO_AGENT.format(pid=pid))
        where = str(folder.real_path())  # the agents are other processes: a path they can open
        rid = {p: f"{folder.name}-{p}"[-64:] for p, _ in agents}
        targets: dict[int, CaptureTarget] = {}
        for p, hello in agents:
            rank = hello.get("rank")
            targets[p] = CaptureTarget(p, "rank" if rank is not None else "main", start_ticks(p),
                                rank=rank, python=hello.get("python"))  # fmt: skip
            sent = link.send(p, {"type": "capture", "kind": kind, "id": rid[p],
                                 "steps": steps, "dir": where,
                                 "max_bytes": max_bytes, "options": options or {}})  # fmt: skip
            if not sent:
                targets[p] = replace(targets[p], status="failed", note="lost the connection")
        tool = Tool(TOOLS[kind], None, ("gputop agent", kind, f"steps={steps}"))
        deadline = time.monotonic() + wait_s
        while any(t.status == "running" for t in targets.values()):
            if cancel.is_set() or time.monotonic() >= deadline:
                break
            time.sleep(0.2)
            link.sample()
            for p, t in targets.items():
                if t.status != "running":
                    continue
                r = link.reply(p, rid[p])
                if r is not None and r["type"] == "ack" and not r["ok"]:
                    targets[p] = replace(t, status="failed", note=r["message"])
                elif r is not None and r["type"] == "capture_done":
                    targets[p] = replace(t, status=r["status"], note=r["message"],
                                         steps=r["steps"], torch=r["torch"],
                                         python=r["python"] or t.python)  # fmt: skip
                    for name in r["files"]:  # names from the agent: only plain ones, here
                        if isinstance(name, str) and plain(name) and folder.size(name) is not None:
                            m = replace(m, files=(*m.files, folder.entry(name)))
                elif link.state_of(p) == "exited":
                    targets[p] = replace(t, status="failed", note=f"pid {p} exited")
            progress(Progress(0, steps, "steps"))  # per-step progress is the agent's to tell
    finally:
        link.close()
    m = replace(m, targets=tuple(targets.values()), tool=tool)
    states = [t.status for t in targets.values()]
    bytes_ = sum(f.bytes for f in m.files)
    if cancel.is_set() and "running" in states:
        return m.ended("cancelled", "cancelled; files already written are kept")
    if "running" in states:
        return m.ended(
            "timeout",
            f"{states.count('running')} process(es) reached no step boundary in {wait_s:g} s: "
            "is training stuck? (a py-spy dump shows where)",
        )
    if bytes_ > max_bytes:
        return m.ended("partial", f"{bytes_} bytes written, over the {max_bytes} byte cap")
    if all(s == "ok" for s in states):
        return m.ended("ok")
    noted = [t for t in targets.values() if t.note]
    notes = (
        noted[0].note
        if len(targets) == 1 and noted
        else "; ".join(f"pid {t.pid}: {t.note}" for t in noted)
    )
    if any(s in ("ok", "partial") for s in states):
        return m.ended("partial", notes)
    return m.ended("failed", notes or "nothing was written")
