"""The agent's daemon thread: serves finished steps to any number of monitors.

A Unix stream socket at ``<runtime dir>/agent-<pid>.sock`` (directory 0700 and verified,
socket 0600); each connecting peer is checked by kernel credentials (SO_PEERCRED) and only
the same user or root is served. A monitor that connects gets a hello (identity and config
fingerprint) and the last few hundred steps, then new steps as they finish and a heartbeat
with the open phase every second. A slow or misbehaving monitor is dropped; training never
waits for any of this (the recorder's memory is all the training thread touches).
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any

from gputop.agent import ranks
from gputop.agent.paths import ensure_private_dir, runtime_dir, socket_path
from gputop.agent.recorder import StepRecorder
from gputop.agent.wire import MAX_LINE, WIRE_VERSION, encode

TICK_S = 0.1
HEARTBEAT_S = 1.0
FINGERPRINT_S = 0.5
MAX_OUTBUF = 8 << 20
"""A monitor that falls this far behind is disconnected (it can reconnect)."""
MAX_BAD_LINES = 8
STEPS_PER_MESSAGE = 100
ENV_IDENTITY = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK")


def peer_uid(sock: socket.socket) -> int | None:
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    _pid, uid, _gid = struct.unpack("3i", raw)
    return uid


def identity(rank_info: dict[str, Any] | None = None) -> dict[str, Any]:
    """Who this process is; ``rank_info`` (ranks.current()) fills rank, local_rank and
    world_size when the launcher's variables do not (torch.multiprocessing.spawn children)."""
    env = os.environ
    ident: dict[str, Any] = {
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "argv": list(sys.argv)[:64],
        "hostname": socket.gethostname(),
        "python": sys.version.split()[0],
        "mono_ns": time.perf_counter_ns(),
        "unix_ns": time.time_ns(),
        "run_id": env.get("GPUTOP_RUN_ID") or env.get("TORCHELASTIC_RUN_ID"),
    }
    for k in ENV_IDENTITY:
        v = env.get(k)
        ident[k.lower()] = int(v) if v is not None and v.lstrip("-").isdigit() else None
    if rank_info is not None:
        ident["ranks"] = rank_info
        for k in ("rank", "local_rank", "world_size"):
            if rank_info.get(k) is not None and (ident[k] is None or k != "local_rank"):
                ident[k] = rank_info[k]
    return ident


class _Client:
    __slots__ = ("bad", "inbuf", "outbuf", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.inbuf = bytearray()
        self.outbuf = bytearray()
        self.bad = 0


class AgentServer:
    """Serves finished steps to monitors from its own thread, so training never waits on one."""

    def __init__(
        self,
        recorder: StepRecorder,
        directory: Path | None = None,
        fingerprint: Any = None,
        tick_hooks: list[Any] | None = None,
        trace: Any = None,
        idle_alone: bool = False,
    ) -> None:
        self.rec = recorder
        self.idle_alone = idle_alone
        """Loaded by attaching: idle (disabled markers) while no monitor is connected."""
        self._idled = False
        self.trace = trace
        """A TraceCapture: torch traces asked for by monitors, run on the training thread."""
        self.directory = directory or runtime_dir()
        self.path: Path | None = None
        self._fingerprint_fn = fingerprint
        self.fingerprint: dict[str, Any] = {}
        self._tick_hooks = tick_hooks or []
        self._clients: dict[int, _Client] = {}
        self._sel = selectors.DefaultSelector()
        self._listener: socket.socket | None = None
        self._sent_seq = -1
        self._gpu_sent_seq = -1
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.problem: str | None = None
        self.refused = 0
        self.ranks: dict[str, Any] = ranks.current()
        """What the hello says about the rank; re-read every tick, a change re-sent."""

    # ---- lifecycle ---------------------------------------------------------------------------

    def start(self) -> bool:
        try:
            ensure_private_dir(self.directory)
            path = socket_path(os.getpid(), self.directory)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # a stale socket of a dead process that had our PID
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(str(path))
            os.chmod(path, 0o600)
            listener.listen(16)
            listener.setblocking(False)
        except Exception as e:  # no socket: training goes on, the buffer still fills
            self.problem = f"gputop agent: no socket ({type(e).__name__}: {e})"
            return False
        self.path = path
        self._listener = listener
        self._sel.register(listener, selectors.EVENT_READ, None)
        self._thread = threading.Thread(target=self._run, name="gputop-agent", daemon=True)
        self._thread.start()
        return True

    def stop(self) -> None:
        """Say goodbye to monitors and remove the socket (atexit)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(1.0)
        with contextlib.suppress(Exception):  # the last steps, then goodbye
            self._refresh_fingerprint()
            self._publish_steps()
            for c in list(self._clients.values()):
                c.sock.setblocking(True)
                c.sock.settimeout(0.5)
            self._flush_all()
        for c in list(self._clients.values()):
            with contextlib.suppress(OSError):
                c.sock.send(encode("bye", pid=os.getpid()), socket.MSG_NOSIGNAL)
            self._drop(c)
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.close()
        if self.path is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()

    # ---- the loop --------------------------------------------------------------------------------

    def _run(self) -> None:
        next_beat = next_fp = 0.0
        while not self._stop.is_set():
            try:
                for key, _ in self._sel.select(TICK_S):
                    if key.data is None:
                        self._accept()
                    else:
                        self._read(key.data)
                now = time.monotonic()
                for hook in self._tick_hooks:
                    hook()
                if now >= next_fp:
                    next_fp = now + FINGERPRINT_S
                    self._refresh_fingerprint()
                self._refresh_ranks()
                self._publish_steps()
                if self.trace is not None:
                    for result in self.trace.take_results():
                        self._broadcast(encode("capture_done", **result))
                if now >= next_beat:
                    next_beat = now + HEARTBEAT_S
                    self._broadcast(self._heartbeat())
                self._flush_all()
            except Exception:  # the agent thread must never die of a bug
                self.rec.errors += 1
                time.sleep(TICK_S)

    def _accept(self) -> None:
        assert self._listener is not None
        try:
            sock, _ = self._listener.accept()
        except OSError:
            return
        uid = peer_uid(sock)
        if uid is None or (uid != os.getuid() and uid != 0):
            self.refused += 1
            sock.close()
            return
        sock.setblocking(False)
        client = _Client(sock)
        self._clients[sock.fileno()] = client
        if self._idled:  # a monitor is back: record again from the next step boundary
            self._idled = False
            self.rec.wake()
        self._sel.register(sock, selectors.EVENT_READ, client)
        client.outbuf += self._hello()
        if self.fingerprint:
            client.outbuf += encode("fingerprint", config=self.fingerprint)
        backlog = list(self.rec.records)
        for i in range(0, len(backlog), STEPS_PER_MESSAGE):
            client.outbuf += self._steps_message(backlog[i : i + STEPS_PER_MESSAGE])
        gpu = list(self.rec.gpu_records)
        if gpu:
            client.outbuf += self._gpu_message(gpu)
        client.outbuf += self._heartbeat()

    def _read(self, client: _Client) -> None:
        try:
            data = client.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            self._drop(client)
            return
        if not data:
            self._drop(client)
            return
        client.inbuf += data
        while b"\n" in client.inbuf:
            line, _, rest = bytes(client.inbuf).partition(b"\n")
            client.inbuf = bytearray(rest)
            self._command(client, line)
        if len(client.inbuf) > MAX_LINE or client.bad > MAX_BAD_LINES:
            self._drop(client)

    def _command(self, client: _Client, line: bytes) -> None:
        try:
            msg = json.loads(line)
            if not isinstance(msg, dict) or msg.get("v") != WIRE_VERSION:
                raise ValueError("not a v1 message")
        except ValueError:
            client.bad += 1
            return
        kind = msg.get("type")
        if kind == "ping":
            client.outbuf += encode("pong", id=msg.get("id"))
        elif kind == "capture" and self.trace is not None:
            why = self.trace.request(msg)
            client.outbuf += encode(
                "ack",
                id=msg.get("id") if isinstance(msg.get("id"), str) else None,
                ok=why is None,
                message=why or "queued: starts at the next step boundary",
            )
        else:
            client.outbuf += encode(
                "ack",
                id=msg.get("id"),
                ok=False,
                message=f"this agent does not handle {str(kind)[:40]!r} requests",
            )

    # ---- messages ------------------------------------------------------------------------------

    def _steps_message(self, records: list[tuple]) -> bytes:
        names = self.rec.names
        steps = []
        for seq, step, t0, t1, durations, samples, tokens, flops, gc_ns, gc_full in records:
            phases = {names[i]: d for i, d in enumerate(durations) if d and i < len(names)}
            item = {
                "seq": seq,
                "step": step,
                "t0_ns": t0,
                "dur_ns": t1 - t0,
                "phases": phases,
                "samples": samples,
                "tokens": tokens,
                "flops": flops,
            }
            if gc_ns is not None:  # absent: GC not timed (an older agent, or GPUTOP_GC=0)
                item["gc_ns"] = gc_ns
                item["gc_full"] = gc_full
            steps.append(item)
        return encode("steps", steps=steps)

    def _gpu_message(self, records: list[tuple[int, int, int, int]]) -> bytes:
        names = self.rec.names
        return encode(
            "gpu",
            phases=[{"step": s, "phase": names[p], "gpu_ns": ns} for _, s, p, ns in records],
        )

    def _heartbeat(self) -> bytes:
        name, t0 = self.rec.open_phase
        now = time.perf_counter_ns()
        return encode(
            "heartbeat",
            mono_ns=now,
            step=self.rec.step_no,
            open_phase=name,
            open_age_s=(now - t0) / 1e9 if name else None,
            since_step_s=(now - self.rec.step_t0) / 1e9,
            errors=self.rec.errors,
            gpu_backlog=self.rec.gpu_backlog,
            gpu_dropped=self.rec.gpu_dropped,
        )

    def _hello(self) -> bytes:
        return encode("hello", agent=identity(self.ranks), wire=WIRE_VERSION,
                      phases=list(self.rec.names))  # fmt: skip

    def _refresh_ranks(self) -> None:
        """A process group that came up since the hello: a new hello says so. A group torn
        down at the end (destroy_process_group) leaves the rank as it was."""
        info = ranks.current()
        if info["dist"] is None and self.ranks.get("dist") is not None:
            return
        if info != self.ranks:
            self.ranks = info
            self._broadcast(self._hello())

    def _refresh_fingerprint(self) -> None:
        if self._fingerprint_fn is None:
            return
        try:
            fp = self._fingerprint_fn()
        except Exception:
            self.rec.errors += 1
            return
        if fp and fp != self.fingerprint:
            self.fingerprint = fp
            self._broadcast(encode("fingerprint", config=fp))

    def _publish_steps(self) -> None:
        fresh = [r for r in list(self.rec.records) if r[0] > self._sent_seq]
        if fresh:
            self._sent_seq = fresh[-1][0]
            for i in range(0, len(fresh), STEPS_PER_MESSAGE):
                self._broadcast(self._steps_message(fresh[i : i + STEPS_PER_MESSAGE]))
        gpu = [g for g in list(self.rec.gpu_records) if g[0] > self._gpu_sent_seq]
        if gpu:
            self._gpu_sent_seq = gpu[-1][0]
            for i in range(0, len(gpu), STEPS_PER_MESSAGE):
                self._broadcast(self._gpu_message(gpu[i : i + STEPS_PER_MESSAGE]))

    def _broadcast(self, data: bytes) -> None:
        for c in list(self._clients.values()):
            c.outbuf += data

    def _flush_all(self) -> None:
        for c in list(self._clients.values()):
            if not c.outbuf:
                continue
            try:
                sent = c.sock.send(c.outbuf, socket.MSG_NOSIGNAL)
                del c.outbuf[:sent]
            except BlockingIOError:
                pass
            except OSError:
                self._drop(c)
                continue
            if len(c.outbuf) > MAX_OUTBUF:
                self._drop(c)

    def _drop(self, c: _Client) -> None:
        self._clients.pop(c.sock.fileno(), None)
        if self.idle_alone and not self._clients and self.rec.on:
            self._idled = True  # the last monitor left an attached agent: idle until one comes
            self.rec.idle()
        with contextlib.suppress(Exception):
            self._sel.unregister(c.sock)
        with contextlib.suppress(OSError):
            c.sock.close()
