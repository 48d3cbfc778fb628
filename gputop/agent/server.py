"""The agent's daemon thread: serves finished steps to a few monitors.

A Unix stream socket at ``<runtime dir>/agent-<pid>.sock`` (directory 0700 and verified, socket
0600; a directory another user took first is left for a fresh private one, and a line says
where); each connecting peer is checked by kernel credentials (SO_PEERCRED) and only the same
user or root is served. A monitor that connects gets a hello (identity and config fingerprint)
and the last few hundred steps, then new steps as they finish and a heartbeat with the open
phase every second. Training never waits for any of this (the recorder's memory is all the
training thread touches), and what clients do cannot make the agent cost more: at most
MAX_CLIENTS are served (more are closed as they come), each with bounded input and output
(one that falls behind is dropped), a bounded number of commands per pass, passes at most
every MIN_PASS_S, and a goodbye at exit that takes EXIT_FLUSH_S at most whoever is connected.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import selectors
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..vocab.stacks import STACKS_PERIOD_S
from . import ranks
from .paths import peer_credentials, runtime_dir, serving_dir, socket_path
from .recorder import StepRecorder
from .stacks import StackSampler
from .wire import WIRE_VERSION, encode

if TYPE_CHECKING:
    from .trace import TraceCapture

TICK_S = 0.1
HEARTBEAT_S = 1.0
FINGERPRINT_S = 0.5
MAX_OUTBUF = 4 << 20
"""A monitor that falls this far behind is disconnected (it can reconnect): with MAX_CLIENTS,
the most the agent ever holds for clients is 64 MiB (a new one's backlog is ~0.3 MiB)."""
MAX_CALLERS = 8
"""Callers of a step's collectives sent at most (the costliest): the monitor reads no more."""
MAX_CLIENTS = 16
"""Monitors served at once; a connection past this is closed as soon as it is accepted."""
MAX_INBUF = 64 << 10
"""A command line longer than this is a protocol error (commands are a few hundred bytes)."""
READ_CHUNK = 16 << 10
COMMANDS_PER_PASS = 8
"""Command lines handled per client per pass; the rest waits (and no more is read) meanwhile."""
ACCEPTS_PER_PASS = 8
MIN_PASS_S = 0.02
"""The agent thread's passes are at least this far apart, however busy its clients keep it."""
EXIT_FLUSH_S = 0.3
"""At exit, what monitors are sent (last steps, goodbye) gets this long in all."""
MAX_BAD_LINES = 8
STEPS_PER_MESSAGE = 100
ENV_IDENTITY = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK")


def peer_uid(sock: socket.socket) -> int | None:
    cred = peer_credentials(sock)
    return None if cred is None else cred[1]


def _cwd() -> str | None:
    try:
        return os.getcwd()
    except OSError:  # removed under it
        return None


def identity(rank_info: dict[str, Any] | None = None) -> dict[str, Any]:
    """Who this process is; ``rank_info`` (ranks.current()) fills rank, local_rank and
    world_size when the launcher's variables do not (torch.multiprocessing.spawn children)."""
    env = os.environ
    ident: dict[str, Any] = {
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "argv": list(sys.argv)[:64],
        "cwd": _cwd(),
        "hostname": socket.gethostname(),
        "python": sys.version.split()[0],
        "gputop": __version__,
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
    __slots__ = ("bad", "inbuf", "outbuf", "scanned", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.inbuf = bytearray()
        self.scanned = 0
        """Bytes at the start of ``inbuf`` known to hold no newline: each byte is looked at
        once however it arrives (linear, where re-scanning a growing line was quadratic)."""
        self.outbuf = bytearray()
        self.bad = 0


class AgentServer:
    """Serves finished steps to monitors from its own thread, so training never waits on one."""

    def __init__(
        self,
        recorder: StepRecorder,
        directory: Path | None = None,
        fingerprint: Callable[[], dict[str, Any]] | None = None,
        tick_hooks: list[Callable[[], None]] | None = None,
        trace: TraceCapture | None = None,
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
        self._made_dir: Path | None = None
        """The fallback directory this server created (removed at stop)."""
        self._fingerprint_fn = fingerprint
        self.fingerprint: dict[str, Any] = {}
        self._tick_hooks = tick_hooks or []
        self._clients: dict[int, _Client] = {}
        self._pending: set[_Client] = set()
        """Clients with complete command lines still buffered (over COMMANDS_PER_PASS)."""
        self._sel = selectors.DefaultSelector()
        self._listener: socket.socket | None = None
        self._sent_seq = -1
        self._gpu_sent_seq = -1
        self._history: collections.deque[tuple[int, bytes]] = collections.deque()
        self._gpu_history: collections.deque[tuple[int, bytes]] = collections.deque()
        """(last seq, encoded message) of what was published, so a new monitor's backlog is
        copied, not encoded again: an accept costs microseconds, not milliseconds."""
        self._next_fp = self._next_beat = self._next_stacks = 0.0
        self.stacks = StackSampler()
        """The process's threads' stacks, sampled every STACKS_PERIOD_S while a monitor is
        connected: the monitor needs no py-spy for this process while they arrive."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.problem: str | None = None
        self.notice: str | None = None
        """One line for the terminal when the agent serves somewhere else than asked."""
        self.refused = 0
        self.turned_away = 0
        """Connections closed because MAX_CLIENTS were already served."""
        self.lagged = 0
        """Monitors dropped for falling MAX_OUTBUF behind."""
        self.ranks: dict[str, Any] = ranks.current()
        """What the hello says about the rank; re-read every tick, a change re-sent."""

    # ---- lifecycle ---------------------------------------------------------------------------

    def start(self) -> bool:
        directory, why = None, None
        try:
            directory, why = serving_dir(self.directory)
            path = socket_path(os.getpid(), directory)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # a stale socket of a dead process that had our PID
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(str(path))
            os.chmod(path, 0o600)
            listener.listen(MAX_CLIENTS)
            listener.setblocking(False)
        except Exception as e:  # no socket: training goes on, the buffer still fills
            self.problem = f"gputop agent: no socket ({type(e).__name__}: {e})"
            if why is not None and directory is not None:  # the fallback made for nothing
                with contextlib.suppress(OSError):
                    directory.rmdir()
            return False
        if why is not None:
            self._made_dir = directory
            self.notice = f"gputop agent: {why}: not serving there; serving at {path} instead"
        self.path = path
        self._listener = listener
        self._sel.register(listener, selectors.EVENT_READ, None)
        self._thread = threading.Thread(target=self._run, name="gputop-agent", daemon=True)
        self._thread.start()
        return True

    def stop(self) -> None:
        """Send monitors the last steps and a goodbye, within EXIT_FLUSH_S in all however many
        are connected and whether or not they read, then remove the socket (atexit)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(1.0)
        with contextlib.suppress(Exception):  # the last steps
            self._refresh_fingerprint()
            self._publish_steps()
        bye = encode("bye", pid=os.getpid())
        for c in list(self._clients.values()):
            c.outbuf += bye
        with contextlib.suppress(Exception):
            self._flush_before(time.monotonic() + EXIT_FLUSH_S)
        for c in list(self._clients.values()):
            self._drop(c)
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.close()
        if self.path is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()
        if self._made_dir is not None:
            with contextlib.suppress(OSError):
                self._made_dir.rmdir()

    def _flush_before(self, deadline: float) -> None:
        """Non-blocking sends to whoever can take them until ``deadline``; the rest is lost."""
        with selectors.DefaultSelector() as sel:
            for c in self._clients.values():
                if c.outbuf:
                    sel.register(c.sock, selectors.EVENT_WRITE, c)
            while sel.get_map() and (left := deadline - time.monotonic()) > 0:
                for key, _ in sel.select(left):
                    c = key.data
                    try:
                        del c.outbuf[: c.sock.send(c.outbuf, socket.MSG_NOSIGNAL)]
                    except BlockingIOError:
                        continue
                    except OSError:
                        c.outbuf.clear()
                    if not c.outbuf:
                        sel.unregister(c.sock)

    # ---- the loop --------------------------------------------------------------------------------

    def _run(self) -> None:
        next_tick = 0.0
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                for key, _ in self._sel.select(max(0.0, next_tick - started)):
                    if key.data is None:
                        self._accept()
                    else:
                        self._read(key.data)
                for client in list(self._pending):
                    self._commands(client)
                if time.monotonic() >= next_tick:
                    next_tick = time.monotonic() + TICK_S
                    self._tick()
                self._flush_all()
            except Exception:  # the agent thread must never die of a bug
                self.rec.errors += 1
                time.sleep(TICK_S)
            rest = MIN_PASS_S - (time.monotonic() - started)
            if rest > 0:  # however busy the clients keep the socket
                self._stop.wait(rest)

    def _tick(self) -> None:
        now = time.monotonic()
        for hook in self._tick_hooks:
            hook()
        if now >= self._next_fp:
            self._next_fp = now + FINGERPRINT_S
            self._refresh_fingerprint()
        self._refresh_ranks()
        self._publish_steps()
        if self.trace is not None:
            for result in self.trace.take_results():
                self._broadcast(encode("capture_done", **result))
        if now >= self._next_beat:
            self._next_beat = now + HEARTBEAT_S
            self._broadcast(self._heartbeat())
        if self._clients and now >= self._next_stacks:
            self._next_stacks = now + STACKS_PERIOD_S
            self._broadcast(self._stacks())

    def _accept(self) -> None:
        """A few connections per pass (the rest wait in the kernel's queue); past MAX_CLIENTS
        or of another user, closed at once: the agent's fds and work stay bounded."""
        assert self._listener is not None
        for _ in range(ACCEPTS_PER_PASS):
            try:
                sock, _ = self._listener.accept()
            except OSError:  # none left, or no fd to spare (EMFILE): the process's, not ours
                return
            uid = peer_uid(sock)
            if uid is None or (uid != os.getuid() and uid != 0):
                self.refused += 1
                sock.close()
            elif len(self._clients) >= MAX_CLIENTS:
                self.turned_away += 1
                sock.close()
            else:
                self._serve(sock)

    def _serve(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        client = _Client(sock)
        self._clients[sock.fileno()] = client
        if self._idled:  # a monitor is back: record again from the next step boundary
            self._idled = False
            self.rec.wake()
        self._sel.register(sock, selectors.EVENT_READ, client)
        out = client.outbuf
        out += self._hello()
        if self.fingerprint:
            out += encode("fingerprint", config=self.fingerprint)
        for _, message in self._history:
            out += message
        for _, message in self._gpu_history:
            out += message
        out += self._heartbeat()

    def _read(self, client: _Client) -> None:
        if client in self._pending:
            return  # what it sent before is not handled yet: read nothing more meanwhile
        try:
            data = client.sock.recv(READ_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            self._drop(client)
            return
        if not data:
            self._drop(client)
            return
        client.inbuf += data
        self._commands(client)

    def _commands(self, client: _Client) -> None:
        """Up to COMMANDS_PER_PASS lines of ``client``'s input, each byte scanned once."""
        buf, start, done = client.inbuf, 0, 0
        self._pending.discard(client)
        while True:
            nl = buf.find(b"\n", max(start, client.scanned))
            if nl < 0:
                client.scanned = len(buf)
                break
            if done == COMMANDS_PER_PASS:
                self._pending.add(client)
                break
            self._command(client, bytes(buf[start:nl]))
            start, done = nl + 1, done + 1
            if client.bad > MAX_BAD_LINES:
                self._drop(client)
                return
        del buf[:start]
        client.scanned = max(0, client.scanned - start)
        if len(buf) > MAX_INBUF:
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
        for (
            seq,
            step,
            t0,
            t1,
            durations,
            samples,
            tokens,
            flops,
            inputs,
            comm,
            comm_ns,
            comm_by,
            data_cpu,
            gc_ns,
            gc_full,
        ) in records:
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
            if inputs is not None:  # absent: no training forward seen (an older agent too)
                item["inputs"] = inputs
            if comm is not None:  # absent: no collective in the step
                item["comm_bytes"] = comm
            if comm_ns is not None:  # absent: no collective outstanding in the step
                item["comm_ns"] = comm_ns
            if comm_by:  # per caller: [bytes, ns outstanding, calls], the largest first
                top = sorted(comm_by.items(), key=lambda kv: -kv[1][1] - kv[1][0])
                item["comm_by"] = {k: list(v) for k, v in top[:MAX_CALLERS]}
            if data_cpu is not None:  # absent: no batch wait timed in the step
                item["data_cpu_ns"] = data_cpu
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

    def _stacks(self) -> bytes:
        return encode("stacks", mono_ns=time.perf_counter_ns(), threads=self.stacks.sample())

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
                chunk = fresh[i : i + STEPS_PER_MESSAGE]
                message = self._steps_message(chunk)
                self._history.append((chunk[-1][0], message))
                self._broadcast(message)
        gpu = [g for g in list(self.rec.gpu_records) if g[0] > self._gpu_sent_seq]
        if gpu:
            self._gpu_sent_seq = gpu[-1][0]
            for i in range(0, len(gpu), STEPS_PER_MESSAGE):
                chunk = gpu[i : i + STEPS_PER_MESSAGE]
                message = self._gpu_message(chunk)
                self._gpu_history.append((chunk[-1][0], message))
                self._broadcast(message)
        _trim(self._history, self.rec.records)
        _trim(self._gpu_history, self.rec.gpu_records)

    def _broadcast(self, data: bytes) -> None:
        for c in list(self._clients.values()):
            if len(c.outbuf) + len(data) > MAX_OUTBUF:
                self.lagged += 1  # not reading: dropped rather than buffered without end
                self._drop(c)
            else:
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

    def _drop(self, c: _Client) -> None:
        if self._clients.pop(c.sock.fileno(), None) is None:
            return
        self._pending.discard(c)
        if self.idle_alone and not self._clients and self.rec.on:
            self._idled = True  # the last monitor left an attached agent: idle until one comes
            self.rec.idle()
        with contextlib.suppress(Exception):
            self._sel.unregister(c.sock)
        with contextlib.suppress(OSError):
            c.sock.close()


def _trim(history: collections.deque[tuple[int, bytes]], records: collections.deque) -> None:
    """Forget published messages whose steps the recorder no longer holds."""
    if not records:
        history.clear()
        return
    oldest = records[0][0]
    while history and history[0][0] < oldest:
        history.popleft()
