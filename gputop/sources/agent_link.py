"""The monitor's side of the agent sockets: find every agent in the target's process tree,
stay connected (reconnect when an agent restarts), and turn what they send into AgentStates.

Everything read is untrusted: it goes through agent_decode, reads are budgeted per tick (a
flood of garbage costs this thread a bounded amount of work and never reaches the UI thread),
and a peer that keeps sending malformed data is disconnected and left alone for a while.

Before a byte is read, the socket must be the target's: its directory owned by the user the
named process runs as and closed to everyone else (checked on an open fd, connected through
it), and the server's kernel credentials (SO_PEERCRED) that process, or another in the
target's tree, of that user (and of ours unless we are root). Where a socket was found (our
runtime dir, the target's, the kernel's list of bound sockets for a fallback directory) is
only a hint; one that fails is dropped with one line in ``problems`` and never tried again.
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import json
import os
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from gputop import __version__
from gputop.agent.paths import (
    UnsafeDirectory,
    bound_agent_sockets,
    connect_private,
    peer_credentials,
    runtime_dir,
    socket_path,
)
from gputop.agent.wire import MAX_LINE
from gputop.model.roles import RANK, RankId, RoleHint
from gputop.model.steps import AgentsSample, AgentState, StepRecord
from gputop.sources import agent_decode as dec
from gputop.sources.agent_sockets import in_root, own_pid, root_of
from gputop.sources.procfs import descendants, parse_environ, runs_python
from gputop.sources.stack_phases import thread_stack
from gputop.sources.stacks import AgentStacks
from gputop.sources.target import start_of

STEP_HISTORY = 512
READ_BUDGET = 1 << 20
"""Bytes read from one agent per tick at most; the rest waits for the next tick."""
MAX_DROPPED_PER_TICK = 50
BACKOFF_S = 5.0
SCAN_S = 2.0
"""The kernel's socket list is read at most this often (only while a process has no agent)..."""
SCAN_MAX_S = 30.0
"""...and, while the tree stays the same and nothing is found there, half as often each time,
down to once per SCAN_MAX_S (a launcher that never serves an agent keeps a process missing)."""
MAX_PROBLEMS = 32
MAX_REFUSED = 1024
EXPECT_S = 15.0
"""A Python process of a job ``gputop run`` started with no agent after this long is said:
its interpreter takes over a second to start, torch several more on a busy machine."""
WITHOUT_AGENT = (
    "without it the verdict has no steps, no eval/GC/checkpoint/log slices, no per-rank budgets"
)
"""What the verdict cannot see when a process has no agent: said wherever that is said..."""
NO_STEPS = "no steps or rank budgets"
"""...and in short where a line must fit 80 columns (the screen's status line)."""


def other_version(pid: int, version: str | None) -> str:
    """One line for an agent that is not this monitor's own: the job imported its own gputop."""
    what = f"gputop-why {version}" if version else "an older gputop-why"
    return (
        f"pid {pid} runs the agent of {what} (the job's own install), this monitor is "
        f"{__version__}: what that agent does not send is left out; "
        f"pip install -U gputop-why in the job's environment, or start it with gputop run"
    )


@dataclass
class _Agent:
    pid: int
    path: Path
    own: int = 0
    """The PID the process knows itself by (its hello says it): ``pid`` unless it runs in a
    PID namespace of its own (a container)."""
    start: int | None = None
    """The process's start time when its socket was found: a later process given the same PID
    (serving its own agent under the same name) is another process, never reconnected to."""
    sock: socket.socket | None = None
    buf: bytearray = field(default_factory=bytearray)
    state: str = "connected"
    """connected, reconnecting (it went away: tried again), exited."""
    hello: dict[str, Any] = field(default_factory=dict)
    fingerprint: dict[str, Any] = field(default_factory=dict)
    steps: collections.deque[StepRecord] = field(default_factory=collections.deque)
    """Every step read since the last reading and the STEP_HISTORY before (``_trim``)."""
    gpu: dict[int, MappingProxyType] = field(default_factory=dict)
    """GPU times per step number, each a snapshot replaced on change: a reading keeps the
    times it was given (a recorder compares readings to see the later ones)."""
    beat: dict[str, Any] = field(default_factory=dict)
    beat_t: float | None = None
    dropped: int = 0
    retry_after: float = 0.0
    replies: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Answers to our requests by request id (acks, then capture_done), the last 32."""
    stacks: AgentStacks | None = None
    """Its threads' stacks as it last sampled them (classified here, as py-spy's are)."""


class AgentLink:
    """The agents source: every agent in the target's tree, kept connected, read as untrusted."""

    def __init__(
        self,
        target: int,
        pids: Callable[[], Iterable[int]] | None = None,
        directories: Callable[[], Iterable[Path]] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        proc_root: str = "/proc",
    ) -> None:
        self.target = target
        self._proc = proc_root
        self._pids = pids or (lambda: descendants(target, proc_root))
        self._dirs = directories or self._default_dirs
        self._clock = clock
        self._wall = wall
        self._agents: dict[int, _Agent] = {}
        self.problems: list[str] = []
        """One line per socket refused as not the target's."""
        self._told = 0
        """How many of ``problems`` a reading has carried: each is in one reading only."""
        self._refused: set[str] = set()
        self._tree: set[int] = set()
        self._next_scan = 0.0
        self._scan_gap = SCAN_S
        self._dirs_seen: list[Path] | None = None
        self._where: dict[int, tuple[int, str]] = {}
        """pid -> (the PID it knows itself by, the prefix to its files): fixed for its life."""
        self._failures: Callable[[], dict[int | None, str]] | None = None
        self._expect_since: dict[int, float] = {}
        self._said: set[int | None] = set()

    def expect_agents(self, failures: Callable[[], dict[int | None, str]]) -> None:
        """Every Python process of the tree should serve an agent (``gputop run`` started the
        job with it): one that has none after ``EXPECT_S`` is said in ``problems``, with the
        reason the agent's copy left (``failures``: pid -> why it did not start) if any."""
        self._failures = failures

    def _default_dirs(self) -> list[Path]:
        """Our own runtime dir, and the target's if its environment says otherwise (read once:
        both are fixed for the target's life)."""
        if self._dirs_seen is None:
            self._dirs_seen = self._find_dirs()
        return self._dirs_seen

    def _find_dirs(self) -> list[Path]:
        dirs = [runtime_dir()]
        try:
            with open(f"{self._proc}/{self.target}/environ", "rb") as f:
                env = parse_environ(f.read())
            uid = os.stat(f"{self._proc}/{self.target}").st_uid
            dirs.append(runtime_dir(env, uid))
        except OSError:
            pass
        return list(dict.fromkeys(dirs))

    # ---- one tick ----------------------------------------------------------------------------

    def sample(self) -> AgentsSample:
        now = self._clock()
        self._discover(now)
        self._missing_agents(now)
        for a in list(self._agents.values()):
            if a.sock is None and a.state == "reconnecting" and now >= a.retry_after:
                self._connect(a, now)
            if a.sock is not None:
                self._read(a, now)
        agents = tuple(self._state(a, now) for a in sorted(self._agents.values(), key=_order))
        for a in self._agents.values():
            _trim(a)
        return AgentsSample(
            target=self.target, t=now, wall=self._wall(), agents=agents, problems=self._news()
        )

    def _news(self) -> tuple[str, ...]:
        new = tuple(self.problems[self._told :])
        self._told = len(self.problems)
        return new

    def _discover(self, now: float) -> None:
        tree = list(self._pids())
        if not set(tree) <= self._tree:  # new processes: look in the kernel's list soon
            self._scan_gap, self._next_scan = SCAN_S, min(self._next_scan, now)
        self._tree = set(tree)
        missing = [pid for pid in tree if pid not in self._agents]
        if not missing:
            return
        dirs = list(self._dirs())
        for gone in [p for p in self._where if p not in self._tree]:
            del self._where[gone]
        for pid in missing:
            own, root = self._place(pid)
            self._adopt(pid, [in_root(root, socket_path(own, d)) for d in dirs])
        missing = [pid for pid in missing if pid not in self._agents]
        if missing and now >= self._next_scan:  # a fallback directory: the kernel knows where
            bound = bound_agent_sockets(self.target, self._proc)
            for pid in missing:
                own, root = self._place(pid)
                self._adopt(pid, [in_root(root, p) for p in bound.get(own, [])])
            found = any(pid in self._agents for pid in missing)
            self._scan_gap = SCAN_S if found else min(2 * self._scan_gap, SCAN_MAX_S)
            self._next_scan = now + self._scan_gap

    def _place(self, pid: int) -> tuple[int, str]:
        """The PID ``pid`` knows itself by and the prefix to its files (a container's)."""
        if pid not in self._where:
            self._where[pid] = (own_pid(pid, self._proc), root_of(pid, self._proc))
        return self._where[pid]

    def _missing_agents(self, now: float) -> None:
        """With ``expect_agents``: the Python processes still without one, once each."""
        if self._failures is None:
            return
        waiting = [p for p in self._tree if p not in self._agents and p not in self._said]
        for pid in [p for p in self._expect_since if p not in waiting]:
            del self._expect_since[pid]
        if not waiting:
            return  # every process serves one: the copy's folder is not read this tick
        failures = self._failures()
        for pid in waiting:
            since = self._expect_since.setdefault(pid, now)
            why = failures.get(pid)
            if why is None and now - since < EXPECT_S:
                continue
            self._said.add(pid)  # said, or not Python (a shell): looked at once either way
            self._expect_since.pop(pid, None)
            if why is None and not runs_python(pid, self._proc):
                continue
            cause = (f"the agent did not start ({why})" if why is not None else
                     f"no agent after {EXPECT_S:g} s (started with -S, -I or -E, or its "
                     "PYTHONPATH replaced, Python skips what starts it)")  # fmt: skip
            self._say(f"pid {pid}: {cause}: {WITHOUT_AGENT}")

    def _say(self, line: str) -> None:
        if line not in self.problems and len(self.problems) < MAX_PROBLEMS:
            self.problems.append(line)

    def _adopt(self, pid: int, candidates: Iterable[Path]) -> None:
        """The first candidate socket at which ``pid``'s agent answers. A file nobody serves (a
        process that died with this PID left it: PIDs are reused) is passed over, and looked at
        again at the next discovery: it must not hide the live agent in another directory."""
        present = [p for p in candidates if str(p) not in self._refused and os.path.lexists(p)]
        uid = _euid(pid, self._proc) if present else None
        if uid is None:
            return
        for path in present:
            sock = self._dial(path, pid, uid)
            if sock is not None:
                own = self._place(pid)[0]
                a = _Agent(pid=pid, path=path, own=own, start=start_of(pid, self._proc))
                a.sock, a.state = sock, "connected"
                self._agents[pid] = a
                return

    def _dial(self, path: Path, pid: int, uid: int) -> socket.socket | None:
        """A connection to ``pid``'s agent at ``path``, once its directory (checked on an open
        fd, connected through it) and the server's credentials say it is that process's; None
        when nobody answers there, or it is refused (one line in ``problems``, never again)."""
        try:
            s = connect_private(path, uid)
        except UnsafeDirectory as e:
            self._refuse(path, f"{e} (the user pid {pid} runs as)")
            return None
        except OSError:  # a stale file, a queue full, gone
            return None
        s.setblocking(False)
        why = self._impostor(s, pid, uid)
        if why is not None:
            s.close()
            self._refuse(path, why)
            return None
        return s

    def _refuse(self, path: Path, why: str) -> None:
        """Never trust ``path``: one line says so, once."""
        if len(self._refused) < MAX_REFUSED:
            self._refused.add(str(path))
        self._say(f"ignored {path}: {why}; someone may be posing as the agent (nothing read "
                  "from it)")  # fmt: skip

    def _connect(self, a: _Agent, now: float) -> None:
        """Again, after the agent went away (it restarts, or the process ends)."""
        if a.start is not None and start_of(a.pid, self._proc) != a.start:
            a.state = "exited"  # gone, or its PID is another process's now
            return
        if not os.path.lexists(a.path):
            if not os.path.exists(f"{self._proc}/{a.pid}"):
                a.state = "exited"
            return
        uid = _euid(a.pid, self._proc)
        if uid is None:
            a.retry_after = now + 1.0
            return
        sock = self._dial(a.path, a.pid, uid)
        if sock is not None:
            a.sock, a.state, a.buf = sock, "connected", bytearray()
        elif str(a.path) in self._refused:
            self._agents.pop(a.pid, None)  # another socket for its pid may still be found
        else:
            a.retry_after = now + 1.0

    def _impostor(self, s: socket.socket, pid: int, uid: int) -> str | None:
        """Why the server behind ``s`` is not ``pid``'s agent, or None when it is: its kernel
        credentials must be ``pid`` (or a process of the target's tree) running as ``uid``, and
        as us unless we are root."""
        cred = peer_credentials(s)
        if cred is None:
            return "its server's credentials cannot be read"
        peer_pid, peer_uid = cred
        if peer_pid != pid and peer_pid not in self._tree:
            return f"it is served by pid {peer_pid}, not by pid {pid} or its job"
        if peer_uid != uid:
            return f"it is served as uid {peer_uid}, not as uid {uid} (the user pid {pid} runs as)"
        if os.geteuid() not in (0, peer_uid):
            return f"it is served as uid {peer_uid}, not as us (uid {os.geteuid()})"
        return None

    def _disconnect(self, a: _Agent, state: str, now: float, backoff: float = 1.0) -> None:
        if a.sock is not None:
            with contextlib.suppress(OSError):
                a.sock.close()
        a.sock = None
        a.state = state
        a.retry_after = now + backoff

    def _read(self, a: _Agent, now: float) -> None:
        assert a.sock is not None
        budget = READ_BUDGET
        closed = False
        while budget > 0:
            try:
                data = a.sock.recv(min(65536, budget))
            except BlockingIOError:
                break
            except OSError:
                closed = True
                break
            if not data:
                closed = True  # what was read before the end is still decoded below
                break
            budget -= len(data)
            a.buf += data
            if len(a.buf) > MAX_LINE and b"\n" not in a.buf:
                a.dropped += 1
                self._disconnect(a, "reconnecting", now, BACKOFF_S)
                return
        bad = 0
        while True:
            nl = a.buf.find(b"\n")
            if nl < 0:
                break
            line = bytes(a.buf[:nl])
            del a.buf[: nl + 1]
            try:
                bad += self._apply(a, dec.decode_line(line), now)
            except dec.Dropped:
                bad += 1
        a.dropped += bad
        if len(a.buf) > MAX_LINE:  # what is held of one agent stays under a line
            a.dropped += 1
            self._disconnect(a, "reconnecting", now, BACKOFF_S)
            return
        if closed:
            self._disconnect(a, "exited" if a.state == "exited" else "reconnecting", now)
        elif bad > MAX_DROPPED_PER_TICK:
            self._disconnect(a, "reconnecting", now, BACKOFF_S)

    def _apply(self, a: _Agent, msg: dict[str, Any], now: float) -> int:
        kind = msg["type"]
        if kind == "steps":
            steps, dropped = dec.parse_steps(msg)
            last = a.steps[-1].step if a.steps else -1
            for s in steps:
                if s.step > last or s.step == 0:  # a restarted agent starts at 0 again
                    if s.step <= last:
                        a.steps.clear()
                    got = a.gpu.get(s.step)
                    a.steps.append(replace(s, gpu=got) if got is not None else s)
                    last = s.step
            return dropped
        if kind == "gpu":
            items, dropped = dec.parse_gpu(msg)
            for step, name, ns in items:
                a.gpu[step] = MappingProxyType({**a.gpu.get(step, {}), name: ns})
                _merge_gpu(a, step)
            return dropped
        if kind == "heartbeat":
            beat = dec.parse_heartbeat(msg)
            if beat is None:
                return 1
            a.beat, a.beat_t = beat, now
            return 0
        if kind == "hello":
            hello = dec.parse_hello(msg)
            if hello is None or hello["pid"] != (a.own or a.pid):
                return 1
            if not a.hello and hello.get("gputop") != __version__:
                self._say(other_version(a.pid, hello.get("gputop")))
            a.hello = hello
            return 0
        if kind == "fingerprint":
            fp = dec.parse_fingerprint(msg)
            if fp is None:
                return 1
            a.fingerprint = fp
            return 0
        if kind == "stacks":
            threads = dec.parse_stacks(msg)
            if threads is None:
                return 1
            a.stacks = AgentStacks(now, tuple(thread_stack(*t) for t in threads))
            return 0
        if kind == "bye":
            a.state = "exited"
            return 0
        if kind in ("ack", "capture_done"):
            reply = dec.parse_reply(msg)
            if reply is None:
                return 1
            if kind == "capture_done" or reply["id"] not in a.replies:
                a.replies[reply["id"]] = reply  # the end outranks the ack
            while len(a.replies) > 32:
                del a.replies[next(iter(a.replies))]
            return 0
        return 0  # unknown types are ignored (forward compatibility)

    def _state(self, a: _Agent, now: float) -> AgentState:
        beat = a.beat
        steps = tuple(a.steps)  # each with its GPU times, merged as they came
        return AgentState(
            pid=a.pid,
            state=a.state,
            rank=a.hello.get("rank"),
            local_rank=a.hello.get("local_rank"),
            world_size=a.hello.get("world_size"),
            hostname=a.hello.get("hostname"),
            argv=a.hello.get("argv", ()),
            fingerprint=MappingProxyType(dict(a.fingerprint)),
            steps=steps,
            open_phase=beat.get("open_phase"),
            open_age_s=_aged(beat.get("open_age_s"), a.beat_t, now),
            since_step_s=_aged(beat.get("since_step_s"), a.beat_t, now),
            heartbeat_age_s=(now - a.beat_t) if a.beat_t is not None else None,
            agent_errors=beat.get("errors", 0),
            dropped=a.dropped,
            cwd=a.hello.get("cwd"),
        )

    def hints(self) -> dict[int, RoleHint]:
        """pid -> rank for each agent that reports one: the agent's word on a process's role
        wins (``model.roles.roles``; the host and stack sources take these as hints)."""
        out = {}
        for a in list(self._agents.values()):  # asked from another source's thread
            rank = a.hello.get("rank")
            if rank is not None:
                got = RankId(rank, a.hello.get("local_rank"), a.hello.get("world_size"), "agent")
                out[a.pid] = RoleHint(RANK, got)
        return out

    def stacks(self) -> dict[int, AgentStacks]:
        """pid -> its threads' stacks as its agent last sampled them, for the agents connected
        now (asked from the stack source's thread)."""
        return {a.pid: a.stacks for a in list(self._agents.values())
                if a.stacks is not None and a.sock is not None}  # fmt: skip

    def connected(self) -> list[tuple[int, dict[str, Any]]]:
        """(pid, hello) of the agents connected now."""
        return [(a.pid, dict(a.hello)) for a in self._agents.values() if a.sock is not None]

    def send(self, pid: int, message: dict[str, Any]) -> bool:
        """One request to one agent (a short line: a blocking send); False when not connected."""
        a = self._agents.get(pid)
        if a is None or a.sock is None:
            return False
        line = json.dumps({"v": 1, **message}).encode() + b"\n"
        try:
            a.sock.setblocking(True)
            a.sock.settimeout(1.0)
            a.sock.sendall(line)
        except OSError:
            return False
        finally:
            with contextlib.suppress(OSError):
                a.sock.setblocking(False)
        return True

    def reply(self, pid: int, request_id: str) -> dict[str, Any] | None:
        a = self._agents.get(pid)
        return a.replies.get(request_id) if a is not None else None

    def state_of(self, pid: int) -> str | None:
        a = self._agents.get(pid)
        return a.state if a is not None else None

    def close(self) -> None:
        for a in self._agents.values():
            if a.sock is not None:
                with contextlib.suppress(OSError):
                    a.sock.close()


def _euid(pid: int, proc_root: str) -> int | None:
    """The effective uid ``pid`` runs as (what its agent's directory and socket are owned by)."""
    try:
        with open(f"{proc_root}/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"Uid:"):
                    return int(line.split()[2])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _trim(a: _Agent) -> None:
    """After a reading: the last STEP_HISTORY steps and GPU times stay. A reading carries every
    step read since the one before however many (600 steps/s read once a second lost one in
    six at a fixed 512); READ_BUDGET bounds what one reading can add."""
    while len(a.steps) > STEP_HISTORY:
        a.steps.popleft()
    if len(a.gpu) > STEP_HISTORY:
        for k in sorted(a.gpu)[: len(a.gpu) - STEP_HISTORY]:
            del a.gpu[k]


def _merge_gpu(a: _Agent, step: int) -> None:
    """A step's GPU times into the step kept, found by its number (the steps kept are in
    order: a restarted agent clears them): a binary search, whatever the message asks."""
    i = bisect.bisect_left(a.steps, step, key=_step_no)
    if i < len(a.steps) and a.steps[i].step == step:
        a.steps[i] = replace(a.steps[i], gpu=a.gpu[step])


def _step_no(s: StepRecord) -> int:
    return s.step


def _aged(value: float | None, at: float | None, now: float) -> float | None:
    """A duration reported at ``at``, as of ``now`` (it kept growing since)."""
    if value is None or at is None:
        return value
    return value + max(0.0, now - at)


def _order(a: _Agent) -> tuple[int, int]:
    rank = a.hello.get("rank")
    return (rank if rank is not None else 1 << 30, a.pid)
