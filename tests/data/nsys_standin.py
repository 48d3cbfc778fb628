#!/usr/bin/env python3
"""A stand-in for the `nsys` CLI (the real one is not installed here): it appends each call's
arguments to $NSYS_STANDIN_LOG as a JSON line, and behaves enough like nsys for gputop:
`launch` runs the command, `start` remembers the session's output, `stop` writes a report."""

import json
import os
import sys

args = sys.argv[1:]
log = os.environ.get("NSYS_STANDIN_LOG")
if log:
    with open(log, "a") as f:
        f.write(json.dumps(args) + "\n")
state = os.environ.get("NSYS_STANDIN_STATE", "/tmp/nsys-standin-state.json")

if args[:1] == ["--version"]:
    print("NVIDIA Nsight Systems version 2025.1.1 (stand-in)")
elif args[:1] == ["launch"]:
    rest = args[1:]
    while rest and rest[0].startswith("--"):
        rest = rest[1:]
    os.execvp(rest[0], rest)
elif args[:1] == ["start"]:
    opts = dict(a[2:].split("=", 1) for a in args[1:] if a.startswith("--") and "=" in a)
    with open(state, "w") as f:
        json.dump(opts, f)
elif args[:1] == ["stop"]:
    with open(state) as f:
        opts = json.load(f)
    with open(opts["output"] + ".nsys-rep", "wb") as f:
        f.write(b"NSYS stand-in report\n" * 100)
else:
    sys.exit(f"stand-in nsys: unknown arguments {args}")
