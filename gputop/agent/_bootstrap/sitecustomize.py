"""Loaded by Python at start-up in processes launched by `gputop run` (this directory is put
first on PYTHONPATH): starts the gputop agent with no change to the training script, then
runs the sitecustomize that would otherwise have been loaded, if there is one."""

import importlib.machinery
import importlib.util
import os
import sys

try:
    import gputop.agent  # noqa: F401  (GPUTOP_AGENT_AUTOSTART=1 starts it)
except Exception as e:  # never stop the user's program from starting
    print(f"gputop: the agent did not start ({type(e).__name__}: {e})", file=sys.stderr)

_here = os.path.dirname(os.path.abspath(__file__))
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
