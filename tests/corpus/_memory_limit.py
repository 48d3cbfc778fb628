"""Bench helper, not a training script: run a command inside a new memory cgroup with a limit,
as a container or a SLURM job's cgroup would (v2: memory.max; v1: memory.limit_in_bytes).

    python _memory_limit.py MIB -- COMMAND...
    python _memory_limit.py --clean

It moves itself into the new cgroup and execs the command (the same pid). Exits 3 with one line
when no cgroup can be made here. --clean removes the cgroups it made once they are empty."""

import contextlib
import glob
import os
import sys
import uuid

PREFIX = "gputop-bench-"


def own_memory_cgroup() -> tuple[str, str]:
    """(the memory hierarchy's mount, this process's cgroup in it) for v2 or v1."""
    with open("/proc/self/cgroup") as f:
        lines = [line.rstrip("\n").split(":", 2) for line in f]
    for _, controllers, path in lines:
        if "memory" in controllers.split(","):
            return "/sys/fs/cgroup/memory", path
    for hid, controllers, path in lines:
        if hid == "0" and controllers == "":
            return "/sys/fs/cgroup", path
    raise OSError("no memory cgroup")


def clean() -> int:
    mount, path = own_memory_cgroup()
    for d in glob.glob(os.path.join(mount, path.lstrip("/"), f"{PREFIX}*")):
        with contextlib.suppress(OSError):  # refused while a process is still in it
            os.rmdir(d)
    return 0


def main() -> int:
    if sys.argv[1:] == ["--clean"]:
        return clean()
    mib, rest = int(sys.argv[1]), sys.argv[3:]
    try:
        mount, path = own_memory_cgroup()
        d = os.path.join(mount, path.lstrip("/"), f"{PREFIX}{uuid.uuid4().hex[:8]}")
        os.mkdir(d)
        limit = "memory.max" if os.path.exists(os.path.join(d, "memory.max")) else (
            "memory.limit_in_bytes")  # fmt: skip
        with open(os.path.join(d, limit), "w") as f:
            f.write(str(mib << 20))
        with open(os.path.join(d, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    except OSError as e:
        print(f"_memory_limit: cannot make a memory cgroup here: {e}", file=sys.stderr)
        return 3
    os.execv(rest[0], rest)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
