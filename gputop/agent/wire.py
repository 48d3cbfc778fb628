"""The agent <-> monitor wire format, version 1 (documented in docs/agent-wire.md). Stdlib only.

Newline-delimited JSON over a Unix stream socket: easy to debug with `socat`, and every
message carries ``v`` and ``type``. Readers must ignore unknown types and fields, and drop a
line that is not valid JSON, too long, or of another major version.
"""

from __future__ import annotations

import json
from typing import Any

WIRE_VERSION = 1
MAX_LINE = 1 << 20
"""A longer line is a protocol error: the peer is disconnected."""


def encode(kind: str, **fields: Any) -> bytes:
    return (
        json.dumps({"v": WIRE_VERSION, "type": kind, **fields}, separators=(",", ":")) + "\n"
    ).encode()
