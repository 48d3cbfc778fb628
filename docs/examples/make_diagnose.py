"""Regenerate the `gputop diagnose` examples the README shows, from real runs of the code as
it is: each command below under `gputop diagnose --json` on a simulated H100, its document kept
as docs/examples/diagnose-NAME.json. tests/unit/test_readme_examples.py renders each document
as `gputop diagnose` prints it and finds the verdict block in the README, line for line: a
README example is what the code says, never written by hand.

    python docs/examples/make_diagnose.py [NAME ...]

The jobs run for real (pids, times and shares differ a little from run to run): after
regenerating, paste each verdict block the test prints into the README.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CORPUS = REPO / "tests" / "corpus"

EXAMPLES = {
    "cpu-transform": (
        25,
        [sys.executable, str(REPO / "examples" / "mlp_plain.py"), "--workers", "0",
         "--slow-transform-ms", "60", "--steps", "100000", "--seconds", "60"],
    ),
    "straggler": (
        30,
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         str(CORPUS / "torchrun_straggler.py"), "--seconds", "60"],
    ),
    "pipe-hang": (
        30,
        [sys.executable, str(CORPUS / "hang_pipe_dead_writer.py"), "--stuck-after", "8",
         "--seconds", "60"],
    ),
}  # fmt: skip
"""name -> (seconds watched, the command as its author starts it)."""


def run(name: str) -> Path:
    seconds, command = EXAMPLES[name]
    out = subprocess.run(
        [sys.executable, "-m", "gputop", "diagnose", "--json", "--sim-board", "h100",
         "--duration", str(seconds), "--", *command],
        capture_output=True, text=True, cwd=REPO, timeout=seconds + 120,
    )  # fmt: skip
    doc = json.loads(out.stdout)
    text = json.dumps(doc, indent=1, sort_keys=True) + "\n"
    # as the README shows the command: from the checkout, with the user's python
    text = text.replace(json.dumps(sys.executable)[1:-1], "python").replace(f"{REPO}/", "")
    path = HERE / f"diagnose-{name}.json"
    path.write_text(text)
    return path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="*", help=f"of {', '.join(EXAMPLES)} (default: all)")
    names = p.parse_args().names or list(EXAMPLES)
    unknown = [n for n in names if n not in EXAMPLES]
    if unknown:
        p.error(f"no example {', '.join(unknown)}: one of {', '.join(EXAMPLES)}")
    for name in names:
        print(run(name))


if __name__ == "__main__":
    main()
