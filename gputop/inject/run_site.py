"""The ``sitecustomize.py`` of a job started by ``gputop run`` or ``gputop diagnose -- CMD``
(copied into the agent's private folder, which is first on the job's PYTHONPATH; never
imported by gputop itself). Python loads it at start-up in every process of the job: it
starts the agent copied beside it (``gputop_why_agent_*``: the monitor's own, whatever the
job has installed), then runs the sitecustomize that would otherwise have been loaded.

Standard library only, and the oldest Python gputop's agent supports. A failure never stops
the job: it is said on stderr and left in the folder as ``failed-<pid>``, where gputop reads
it. Once gputop has removed the folder (the job outlived it), nothing happens.
"""

import importlib.machinery
import importlib.util
import os
import sys


def _start(here):
    try:
        names = [n for n in os.listdir(here) if n.startswith("gputop_why_agent_")]
    except OSError:
        return
    if len(names) != 1:
        return
    try:
        boot = __import__(names[0] + ".agent.boot", fromlist=["start"])
        boot.start(here, False)
    except Exception as e:  # never stop the user's program from starting
        line = f"{type(e).__name__}: {e}".replace("\n", " ")[:300]
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
            fd = os.open(os.path.join(here, f"failed-{os.getpid()}"), flags, 0o600)
            os.write(fd, (line + "\n").encode("utf-8", "replace"))
            os.close(fd)
        except OSError:
            pass
        sys.stderr.write(f"gputop: the agent did not start ({line})\n")


_here = os.path.dirname(os.path.abspath(__file__))
_start(_here)

_rest = [p for p in sys.path if os.path.abspath(p or ".") != _here]
_spec = importlib.machinery.PathFinder.find_spec("sitecustomize", _rest)
if (
    _spec is not None
    and _spec.loader is not None
    and _spec.origin
    and os.path.dirname(_spec.origin) != _here
):
    _module = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_module)
