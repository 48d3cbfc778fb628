"""Who is at the other end of a socket a parked thread reads. TCP: /proc/PID/net/tcp and tcp6
(the reader's own network namespace) list each connection's local and remote address, state
and inode; the peer's entry is the one with the two addresses swapped. Unix: the kernel's
sock_diag answers the peer's inode (``unix_diag.py``). Either way the peer's inode leads to
the process holding it among the job's (/proc/PID/fd links). Read bounded: a busy server's
table may be long."""

from __future__ import annotations

from typing import NamedTuple

from gputop.model.stacks import SocketPeer
from gputop.sources.syscalls import holding
from gputop.sources.unix_diag import unix_end

MAX_NET_BYTES = 1 << 20
"""Bytes of one /proc/PID/net/tcp* file read (about 7,000 connections)."""
TABLES = ("tcp", "tcp6")


class Conn(NamedTuple):
    """One line of /proc/net/tcp or tcp6: addresses as the kernel prints them (hex)."""

    local: str
    remote: str
    inode: int


def parse_net(text: str) -> list[Conn]:
    """The lines that parse; the header and anything malformed are skipped."""
    out = []
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) < 10 or ":" not in parts[1] or ":" not in parts[2]:
            continue
        try:
            out.append(Conn(parts[1], parts[2], int(parts[9])))
        except ValueError:
            continue
    return out


def address(hexed: str) -> str:
    """'0100007F:1F90' -> '127.0.0.1:8080'; an IPv6 address as 8 groups ('[...]:port')."""
    host, _, port = hexed.partition(":")
    try:
        number = int(port, 16)
        raw = bytes.fromhex(host)
    except ValueError:
        return hexed[:64]
    if len(raw) == 4:
        return f"{'.'.join(str(b) for b in reversed(raw))}:{number}"
    words = [raw[i : i + 4][::-1] for i in range(0, len(raw), 4)]  # each word host-endian
    flat = b"".join(words)
    if flat[:12] == b"\0" * 10 + b"\xff\xff":  # IPv4-mapped
        return f"{'.'.join(str(b) for b in flat[12:])}:{number}"
    groups = ":".join(flat[i : i + 2].hex() for i in range(0, len(flat), 2))
    return f"[{groups}]:{number}"


def _read(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(MAX_NET_BYTES).decode("ascii", "replace")
    except OSError:
        return ""


def socket_peer(pid: int, inode: int, pids: list[int], proc: str = "/proc") -> SocketPeer | None:
    """The other end of ``pid``'s socket ``inode``: its address, and the process of ``pids``
    that holds it (None: another host, or a process outside the job); None when the socket is
    neither a TCP connection of ``pid``'s namespace nor a connected Unix socket."""
    conns = [c for t in TABLES for c in parse_net(_read(f"{proc}/{pid}/net/{t}"))]
    mine = next((c for c in conns if c.inode == inode), None)
    if mine is None:
        return _unix_peer(inode, pids, proc)
    peer = next((c for c in conns if c.local == mine.remote and c.remote == mine.local), None)
    held = holding(f"socket:[{peer.inode}]", pids, proc) if peer is not None and peer.inode else ()
    holder = next((pid for pid, _ in held), None)
    return SocketPeer(address(mine.remote), holder, peer is not None)


def _unix_peer(inode: int, pids: list[int], proc: str) -> SocketPeer | None:
    own = unix_end(inode)
    if own is None or own.peer is None:
        return None
    other = unix_end(own.peer) if not own.name else None  # a client's name is its server's
    name = own.name or (other.name if other is not None else "") or f"socket:[{own.peer}]"
    held = holding(f"socket:[{own.peer}]", pids, proc)
    holder = next((p for p, _ in held), None)
    return SocketPeer(name, holder, True, "Unix")
