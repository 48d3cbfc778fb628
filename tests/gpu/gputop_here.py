"""Run gputop from this checkout (``python gputop_here.py diagnose ...``).

The checkout goes on this process's ``sys.path``, never on PYTHONPATH: the jobs gputop starts
inherit its environment, and a job must not find gputop (it runs where a user's job would,
with no gputop installed). ``GPUTOP_CHECK_SITE`` names a folder of gputop's own missing
dependencies (py-spy, nvidia-ml-py), kept off the jobs' path for the same reason.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
if os.environ.get("GPUTOP_CHECK_SITE"):
    sys.path.insert(1, os.environ["GPUTOP_CHECK_SITE"])
    os.environ["PATH"] = os.environ["GPUTOP_CHECK_SITE"] + "/bin" + os.pathsep + os.environ["PATH"]

from gputop.cli import main

sys.exit(main())
