"""What the integration tests share: gputop built into a wheel and installed into a venv of its
own (as pipx makes it), and a venv for jobs that has torch and no gputop. Made once per test
process (about a minute), for every module that runs jobs the way the headline use does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from harness import Harness
from linked_venv import linked_venv
from tests_support import REPO


def _venv(path: Path, *packages: str) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=300)
    python = path / "bin" / "python"
    if packages:
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             *packages], check=True, timeout=1200,
        )  # fmt: skip
    return python


@pytest.fixture(scope="session")
def installs(tmp_path_factory) -> tuple[Path, Path]:
    """(gputop's command from its wheel in its own venv, the job venv's python: torch linked
    in, no gputop)."""
    root = tmp_path_factory.mktemp("installs")
    dist = root / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
         "--disable-pip-version-check", "-w", str(dist), str(REPO)],
        check=True, timeout=600, cwd=root,
    )  # fmt: skip
    (wheel,) = dist.glob("gputop_why-*.whl")
    _venv(root / "gputop-venv", str(wheel))
    job = linked_venv(root / "job-venv", "torch")
    cannot = subprocess.run([str(job), "-c", "import gputop"], cwd=root, capture_output=True)
    assert cannot.returncode != 0, "the job's venv must not have gputop"
    return root / "gputop-venv" / "bin" / "gputop", job


@pytest.fixture
def separate(installs) -> Harness:
    """The corpus harness with gputop from its wheel and the jobs in the other venv."""
    gputop, job = installs
    return Harness(gputop=(str(gputop),), job_python=str(job))
