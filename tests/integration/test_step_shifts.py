"""A real job whose data gets slower midway (tests/corpus/slower_midway.py): `gputop diagnose
--json` marks the shift within 20 steps of the step the job changed at, with the data wait as
the slice that moved, and says the steps since against those before with an interval."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jsonschema
import pytest

from gputop import schemas
from gputop.sources.stacks import find_py_spy

pytest.importorskip("torch")

CORPUS = os.path.join(os.path.dirname(__file__), "..", "corpus")
FROM_STEP = 400
WATCH_S = 12.0
"""The job's steps are about 10 ms, 35 with the slower shard: the shift comes 4-5 s in, and
the 12 s watch leaves the steps after it 200 or more."""


@pytest.mark.skipif(find_py_spy() is None, reason="py-spy is not installed")
def test_a_slower_shard_midway_is_a_shift_at_its_step_with_the_data_wait_moved(tmp_path):
    script = [sys.executable, "slower_midway.py", "--from-step", str(FROM_STEP),
              "--extra-ms", "25", "--seconds", str(WATCH_S + 30)]  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-m", "gputop", "diagnose", "--json", "--duration", str(WATCH_S),
         "--", *script],
        capture_output=True, text=True, timeout=WATCH_S + 120, cwd=CORPUS,
        env={**os.environ, "XDG_STATE_HOME": str(tmp_path)},
    )  # fmt: skip
    doc = json.loads(out.stdout)
    jsonschema.validate(doc, schemas.load("diagnose"))
    near = [s for s in doc["shifts"] if abs(s["step"] - FROM_STEP) <= 20]
    assert near, doc["shifts"]
    shift = near[0]
    assert shift["slices"][0] == "data" and shift["rel"] > 1.0, shift
    assert shift["moved_s"]["data"] == pytest.approx(0.025, rel=0.3), shift
    if shift is doc["shifts"][-1]:  # the latest: the steps since, against those before
        assert shift["change"]["distinguishable"] and shift["change"]["rel"] > 1.0, shift
