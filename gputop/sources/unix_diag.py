"""The other end of a Unix socket, from the kernel's sock_diag (what `ss -xp` reads): one
netlink request by inode answers the peer's inode (``UNIX_DIAG_PEER``) and the socket's bound
path (``UNIX_DIAG_NAME``). /proc/net/unix lists no peers, so this is the one way to it
without root. Answers come from gputop's own network namespace (a job in a container of its
own: nothing, said as no answer). Every reply is parsed bounded; anything malformed is no
answer. Linux only (``socket.AF_NETLINK``)."""

from __future__ import annotations

import os
import socket
import struct
from typing import NamedTuple

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 0x1
NLMSG_ERROR = 2
NLMSG_DONE = 3
UDIAG_SHOW_NAME = 0x1
UDIAG_SHOW_PEER = 0x4
UNIX_DIAG_NAME = 0
UNIX_DIAG_PEER = 2
ANY_COOKIE = 0xFFFFFFFF
"""Both cookie words: match the inode alone."""
REPLY_BYTES = 8192
"""One reply to a request by inode: a header, the message and two attributes."""
TIMEOUT_S = 0.2
"""The kernel answers at once; a reply later than this is no answer."""
MAX_NAME = 108
"""``sun_path``'s size: a longer name is malformed."""

_HEADER = struct.Struct("=IHHII")  # nlmsghdr: len, type, flags, seq, pid
_REQUEST = struct.Struct("=BBHIIIII")  # unix_diag_req: family, protocol, pad, states, ino,
# show, cookie[2]
_MESSAGE = struct.Struct("=BBBBIII")  # unix_diag_msg: family, type, state, pad, ino, cookie[2]
_ATTR = struct.Struct("=HH")  # rtattr: len, type


class UnixEnd(NamedTuple):
    """What sock_diag says of one Unix socket."""

    peer: int | None
    """The inode of the socket at the other end; None: not connected."""
    name: str
    """The path it is bound to ("@name" for an abstract one), "" for none."""


def request(inode: int, seq: int = 1) -> bytes:
    """A sock_diag request for the Unix socket ``inode``, with its peer and name."""
    body = _REQUEST.pack(socket.AF_UNIX, 0, 0, 0xFFFFFFFF, inode,
                         UDIAG_SHOW_NAME | UDIAG_SHOW_PEER, ANY_COOKIE, ANY_COOKIE)  # fmt: skip
    head = _HEADER.pack(_HEADER.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, seq, 0)
    return head + body


def _name(raw: bytes) -> str:
    raw = raw[:MAX_NAME]
    if raw.startswith(b"\0"):  # an abstract name: no file, "@" as ss writes it
        return "@" + raw[1:].decode("utf-8", "replace")
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def parse_reply(data: bytes, inode: int) -> UnixEnd | None:
    """The answer about ``inode`` in one netlink reply; None for an error, another socket, or
    anything that does not parse."""
    if len(data) < _HEADER.size + _MESSAGE.size:
        return None
    length, kind, _, _, _ = _HEADER.unpack_from(data)
    if kind in (NLMSG_ERROR, NLMSG_DONE) or kind != SOCK_DIAG_BY_FAMILY:
        return None
    end = min(length, len(data))
    family, _, _, _, ino, _, _ = _MESSAGE.unpack_from(data, _HEADER.size)
    if family != socket.AF_UNIX or ino != inode:
        return None
    at = _HEADER.size + _MESSAGE.size
    peer: int | None = None
    name = ""
    while at + _ATTR.size <= end:
        size, attr = _ATTR.unpack_from(data, at)
        if size < _ATTR.size or at + size > end:
            return None
        value = data[at + _ATTR.size : at + size]
        if attr == UNIX_DIAG_PEER and len(value) >= 4:
            peer = struct.unpack_from("=I", value)[0] or None
        elif attr == UNIX_DIAG_NAME:
            name = _name(value)
        at += (size + 3) & ~3  # attributes are 4-byte aligned
    return UnixEnd(peer, name)


def unix_end(inode: int) -> UnixEnd | None:
    """The peer and name of the Unix socket ``inode`` in gputop's network namespace; None when
    it is not one there, or the kernel cannot be asked (no AF_NETLINK, a seccomp filter)."""
    family = getattr(socket, "AF_NETLINK", None)
    if family is None or not 0 < inode < 1 << 32:
        return None
    try:
        with socket.socket(family, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG) as s:
            s.settimeout(TIMEOUT_S)
            seq = int.from_bytes(os.urandom(4), "little") or 1
            s.send(request(inode, seq))
            return parse_reply(s.recv(REPLY_BYTES), inode)
    except OSError:
        return None
