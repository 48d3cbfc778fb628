"""/proc/net/tcp read for a parked reader's peer (``sources/sockets.py``): addresses as the
kernel prints them, and crafted lines skipped."""

from __future__ import annotations

from gputop.model.stacks import socket_read
from gputop.sources.sockets import address, parse_net

TABLE = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:AD43 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 20 4 30 10 -1
   1: 0100007F:1F90 0100007F:AD43 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0000000000000000 20 4 30 10 -1
   2: garbage
   3: 0100007F:1F90 0100007F:AD43 01 x x x x x x notanumber
"""  # noqa: E501


def test_connections_parse_and_crafted_lines_are_skipped():
    conns = parse_net(TABLE)
    assert [(c.local, c.remote, c.inode) for c in conns] == [
        ("0100007F:AD43", "0100007F:1F90", 4242),
        ("0100007F:1F90", "0100007F:AD43", 4343),
    ]


def test_addresses_read_as_people_write_them():
    assert address("0100007F:1F90") == "127.0.0.1:8080"
    assert address("0000000000000000FFFF00000100007F:0050") == "127.0.0.1:80"
    loopback = "[0000:0000:0000:0000:0000:0000:0000:0001]:22"
    assert address("00000000000000000000000001000000:0016") == loopback
    assert address("zz:zz") == "zz:zz"


def test_only_a_socket_read_has_an_inode():
    assert socket_read("recvfrom socket:[4242]") == 4242
    assert socket_read("read socket:[7]") == 7
    assert socket_read("read pipe:[7]") is None
    assert socket_read("futex") is None
    assert socket_read("recvfrom socket:[x]") is None
