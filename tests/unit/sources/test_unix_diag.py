"""A Unix socket's other end from sock_diag (``sources/unix_diag.py``): replies built as the
kernel lays them out, and replies that are not (truncated, overlong attributes, another
socket, an error) read as no answer, never an exception."""

from __future__ import annotations

import socket
import struct

import pytest

from gputop.sources import unix_diag as d


def attr(kind: int, value: bytes) -> bytes:
    size = 4 + len(value)
    return struct.pack("=HH", size, kind) + value + b"\0" * ((-size) % 4)


def reply(inode: int, *attrs: bytes, kind: int = d.SOCK_DIAG_BY_FAMILY) -> bytes:
    body = struct.pack("=BBBBIII", socket.AF_UNIX, socket.SOCK_STREAM, 1, 0, inode, 0, 0)
    body += b"".join(attrs)
    return struct.pack("=IHHII", 16 + len(body), kind, 0, 1, 0) + body


def test_the_peer_and_the_bound_path():
    got = d.parse_reply(reply(7, attr(d.UNIX_DIAG_NAME, b"/run/a.sock"),
                              attr(d.UNIX_DIAG_PEER, struct.pack("=I", 8))), 7)  # fmt: skip
    assert got == d.UnixEnd(8, "/run/a.sock")


def test_an_abstract_name_and_no_peer():
    got = d.parse_reply(reply(7, attr(d.UNIX_DIAG_NAME, b"\0embed")), 7)
    assert got == d.UnixEnd(None, "@embed")


@pytest.mark.parametrize("data", [
    b"", b"\0" * 15, reply(8, attr(d.UNIX_DIAG_PEER, b"\1\0\0\0")),  # another socket
    reply(7, kind=d.NLMSG_ERROR), reply(7, kind=d.NLMSG_DONE),
    reply(7, struct.pack("=HH", 400, d.UNIX_DIAG_PEER) + b"\1\0\0\0"),  # past the message
    reply(7, struct.pack("=HH", 2, d.UNIX_DIAG_PEER)),  # shorter than its own header
])  # fmt: skip
def test_a_reply_that_does_not_fit_is_no_answer(data):
    assert d.parse_reply(data, 7) is None


def test_the_request_asks_for_one_inode_with_its_peer_and_name():
    raw = d.request(1234, seq=9)
    length, kind, flags, seq, _ = struct.unpack_from("=IHHII", raw)
    family, _, _, states, ino, show, c0, c1 = struct.unpack_from("=BBHIIIII", raw, 16)
    assert (length, kind, flags, seq) == (len(raw), d.SOCK_DIAG_BY_FAMILY, d.NLM_F_REQUEST, 9)
    assert (family, ino, states) == (socket.AF_UNIX, 1234, 0xFFFFFFFF)
    assert show == d.UDIAG_SHOW_NAME | d.UDIAG_SHOW_PEER and c0 == c1 == d.ANY_COOKIE


def test_an_inode_out_of_range_asks_nothing():
    assert d.unix_end(0) is None and d.unix_end(1 << 40) is None
