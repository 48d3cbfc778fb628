"""Real captures (py-spy on a real process) whose folder is swapped for a symlink while they
run (issue 17 item 1): the files stay in the folder gputop made, the link's target is neither
written nor chmodded; a second user racing in a sticky root gets nowhere, and a root others may
write is refused by `gputop capture` in one line."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from gputop.capture.folder import CaptureError
from gputop.capture.take import Bounds, take

SLEEPER = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(120)"]
ATTACK = r"""
# every new capture folder: rename it away and plant a link to the attacker's folder
while :; do
  for d in "$1"/2*; do
    case "$d" in *.moved) continue ;; esac
    [ -d "$d" ] && [ ! -L "$d" ] && mv "$d" "$d.moved" 2>/dev/null && ln -s "$2" "$d"
  done
done
"""


@pytest.fixture
def sleeper():
    job = subprocess.Popen(SLEEPER, stdout=subprocess.PIPE, text=True)
    assert job.stdout is not None and job.stdout.readline() == "up\n"  # py-spy can read it
    yield job
    job.kill()
    job.wait()


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    v = tmp_path / "victim"
    v.mkdir()
    v.chmod(0o755)
    (v / "theirs").write_text("untouched")
    return v


def untouched(v: Path) -> bool:
    return stat.S_IMODE(v.stat().st_mode) == 0o755 and sorted(os.listdir(v)) == ["theirs"]


@pytest.mark.parametrize(
    ("kind", "files"),
    [("pyspy-dump", ["manifest.json", "stacks.json", "stacks.txt"]),
     ("pyspy-flame", ["flame.svg", "manifest.json", "pyspy.speedscope.json"])],
)  # fmt: skip
def test_a_folder_swapped_for_a_link_mid_capture_keeps_every_file(
    sleeper, tmp_path, victim, kind, files
):
    root = tmp_path / "caps"
    moved: list[Path] = []

    def swap(folder: Path) -> None:  # called once the folder and its first manifest exist
        moved.append(folder.with_name(folder.name + ".moved"))
        os.rename(folder, moved[0])
        os.symlink(victim, folder)

    m, _ = take(kind, sleeper.pid, root, Bounds(seconds=1), started=swap)
    assert untouched(victim)
    assert m.status in ("ok", "partial"), m.reason
    assert sorted(os.listdir(moved[0])) == files
    for name in files:
        assert stat.S_IMODE((moved[0] / name).stat().st_mode) == 0o600
    assert stat.S_IMODE(moved[0].stat().st_mode) == 0o700


def _nobody_can_run() -> str | None:
    if os.geteuid() != 0:
        return "needs root to run the attacker as user nobody"
    if shutil.which("setpriv") is None:
        return "needs setpriv to run the attacker as user nobody"
    return None


@pytest.mark.skipif(_nobody_can_run() is not None, reason=str(_nobody_can_run()))
@pytest.mark.parametrize("mode", [0o777, 0o1777])
def test_a_second_user_racing_to_swap_folders_gets_nothing(sleeper, mode):
    """A root every user may write: refused (before, the racer's folder got the stacks). The
    same with the sticky bit, like /tmp: captures go on, and the racer cannot rename them."""
    # pytest's own tmp is root-only: /tmp is open to every user, like a shared scratch disk
    base = Path(tempfile.mkdtemp(prefix="gputop-swap-", dir="/tmp"))
    base.chmod(0o755)
    root, theirs = base / "caps", base / "theirs"
    root.mkdir()
    root.chmod(mode)
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)
    attacker = subprocess.Popen(
        ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
         "sh", "-c", ATTACK, "sh", str(root), str(theirs)],
        start_new_session=True, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    results, errors = [], []
    try:
        for _ in range(3):
            try:
                results.append(take("pyspy-dump", sleeper.pid, root))
            except CaptureError as e:
                errors.append(str(e))
    finally:
        os.killpg(attacker.pid, signal.SIGKILL)
        attacker.wait()
    try:
        assert os.listdir(theirs) == []
        assert stat.S_IMODE(theirs.stat().st_mode) == 0o755
        if mode == 0o777:
            assert errors == [errors[0]] * 3 and "can be written by other users" in errors[0]
            assert os.listdir(root) == []
        for m, folder in results:
            assert m.status == "ok", m.reason
            assert not folder.is_symlink()
            assert {"manifest.json", "stacks.txt", "stacks.json"} == set(os.listdir(folder))
        assert len(results) == (0 if mode == 0o777 else 3)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_gputop_capture_refuses_a_root_others_may_write_in_one_line(sleeper, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    out = subprocess.run(
        [sys.executable, "-m", "gputop", "capture", "pyspy-dump", "--pid", str(sleeper.pid),
         "--dir", str(shared)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 1
    assert out.stderr == (
        f"gputop: {shared} can be written by other users (mode 0777, no sticky bit): they could "
        "swap a capture folder for a link; pass --dir (or set GPUTOP_CAPTURE_DIR) to a folder "
        "only you can write\n"
    )
    assert os.listdir(shared) == []
