"""Capture folders that no one can swap (issue 17 item 1): the folder is held by a descriptor
from the moment it is made, so renaming it and planting a symlink in its place sends nothing
to the link's target; a root that would let another user do that is refused in one line."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from gputop.capture import folder as fold
from gputop.capture.folder import CaptureError

NOBODY = 65534
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a folder to nobody")


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A folder an attacker wants gputop to write into and chmod: 0755, one file of its own."""
    v = tmp_path / "victim"
    v.mkdir()
    v.chmod(0o755)
    (v / "theirs").write_text("untouched")
    return v


def untouched(v: Path) -> bool:
    return stat.S_IMODE(v.stat().st_mode) == 0o755 and sorted(os.listdir(v)) == ["theirs"]


def swap(root: Path, name: str, victim: Path) -> Path:
    """What the attacker does: rename the new capture folder away, plant a link to the victim."""
    moved = root / (name + ".moved")
    os.rename(root / name, moved)
    os.symlink(victim, root / name)
    return moved


def test_a_folder_swapped_for_a_link_once_made_still_gets_every_file(tmp_path, victim):
    root = tmp_path / "caps"
    with fold.new_folder(root, "pyspy-dump", now=0.0, host="box") as f:
        moved = swap(root, f.name, victim)
        f.write("stacks.txt", b"the stacks")
        f.write("manifest.json", b"{}")
        f.write("manifest.json", b'{"again": 1}')  # rewritten at the end: replaced in place
        entry = f.entry("stacks.txt")
    assert untouched(victim)
    assert sorted(os.listdir(moved)) == ["manifest.json", "stacks.txt"]
    assert (moved / "manifest.json").read_text() == '{"again": 1}'
    assert entry.path == "stacks.txt" and entry.bytes == 10


@pytest.mark.parametrize("planted", ["link", "their folder"])
def test_a_folder_swapped_between_mkdir_and_chmod_is_refused_and_the_target_not_chmodded(
    tmp_path, victim, monkeypatch, planted
):
    if planted == "their folder" and os.geteuid() != 0:
        pytest.skip("needs root to plant a folder of another user")
    root = tmp_path / "caps"
    root.mkdir(mode=0o700)
    name = "19700101T000000Z-pyspy-dump-box"
    real_mkdir = os.mkdir

    def mkdir_then_swap(path, *args, **kwargs):  # the attacker wins the race every time
        real_mkdir(path, *args, **kwargs)
        if os.path.basename(path) != name:
            return
        if planted == "link":
            swap(root, name, victim)
        else:
            os.rename(root / name, root / (name + ".moved"))
            real_mkdir(root / name)
            os.chmod(root / name, 0o755)
            os.chown(root / name, NOBODY, NOBODY)

    monkeypatch.setattr(os, "mkdir", mkdir_then_swap)
    with pytest.raises(CaptureError, match=f"{name} was replaced right after it was made"):
        fold.new_folder(root, "pyspy-dump", now=0.0, host="box")
    assert untouched(victim)
    if planted == "their folder":
        assert stat.S_IMODE((root / name).stat().st_mode) == 0o755  # not chmodded


def test_a_current_folder_that_is_gone_is_said_in_one_line(tmp_path, monkeypatch):
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    with pytest.raises(CaptureError, match="cannot open the capture folder caps: No such file"):
        fold.new_folder(Path("caps"), "pyspy-dump")


def test_a_tool_given_the_folder_writes_through_the_descriptor(tmp_path, victim):
    """py-spy gets ``/proc/self/fd/N/...`` with the descriptor passed: a swap after the tool
    starts changes nothing either."""
    import sys

    from gputop.capture.external import run_tool

    root = tmp_path / "caps"
    with fold.new_folder(root, "pyspy-flame", now=0.0, host="box") as f:
        moved = swap(root, f.name, victim)
        code = "import sys; open(sys.argv[1], 'w').write('samples')"
        out = run_tool([sys.executable, "-c", code, f.tool_path("out.partial")], 30,
                       pass_fds=(f.fd,))  # fmt: skip
        assert out.returncode == 0, out.stderr_tail
        f.rename("out.partial", "out")
        assert f.size("out") == 7
    assert untouched(victim)
    assert (moved / "out").read_text() == "samples"


def test_file_names_stay_in_the_folder(tmp_path):
    with fold.new_folder(tmp_path / "caps", "pyspy-dump", now=0.0, host="box") as f:
        for bad in ("../x", "a/b", "..", ""):
            with pytest.raises(ValueError):
                f.write(bad, b"x")
            assert f.size(bad) is None
    assert sorted(os.listdir(tmp_path)) == ["caps"]


# ---- roots that are refused, each with one line ----


def refused(root: Path) -> str:
    with pytest.raises(CaptureError) as e:
        fold.new_folder(root, "pyspy-dump", now=0.0, host="box")
    line = str(e.value)
    assert "\n" not in line and "--dir" in line, line
    return line


def test_a_root_that_is_a_symlink_is_refused(tmp_path, victim):
    os.symlink(victim, tmp_path / "caps")
    assert refused(tmp_path / "caps") == (
        f"the capture folder {tmp_path / 'caps'} is a symlink: pass --dir (or set "
        "GPUTOP_CAPTURE_DIR) to a folder only you can write"
    )
    assert untouched(victim)


def test_a_root_others_may_write_without_the_sticky_bit_is_refused(tmp_path):
    root = tmp_path / "caps"
    root.mkdir()
    root.chmod(0o777)
    line = refused(root)
    assert line.startswith(f"{root} can be written by other users (mode 0777, no sticky bit)")
    assert os.listdir(root) == []


@root_only
def test_a_root_a_shared_group_may_write_is_refused_a_private_group_is_not(tmp_path):
    root = tmp_path / "caps"
    root.mkdir()
    root.chmod(0o770)
    os.chown(root, 0, NOBODY)  # nogroup: not root's own group
    assert refused(root).startswith(f"{root} can be written by its group (mode 0770")
    assert os.listdir(root) == []
    os.chown(root, 0, 0)  # root's user-private group (umask 002 on Debian makes these 0775)
    with fold.new_folder(root, "pyspy-dump", now=0.0, host="box") as f:
        f.write("x", b"1")


def test_a_parent_others_may_write_is_refused_and_nothing_is_made_below_it(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    line = refused(shared / "mine" / "caps")
    assert line.startswith(f"{shared} can be written by other users (mode 0777")
    assert os.listdir(shared) == []


def test_a_sticky_folder_like_tmp_is_fine_and_a_missing_root_is_made_private(tmp_path):
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    old = os.umask(0)
    try:
        f = fold.new_folder(sticky / "a" / "caps", "pyspy-dump", now=0.0, host="box")
    finally:
        os.umask(old)
    with f:
        f.write("x", b"1")
    for p in (sticky / "a", sticky / "a" / "caps", f.path):
        assert stat.S_IMODE(p.stat().st_mode) == 0o700, p
    assert (f.path / "x").read_bytes() == b"1"


def test_a_symlink_of_ours_on_the_way_is_followed(tmp_path):
    (tmp_path / "real").mkdir()
    os.symlink("real", tmp_path / "link")
    with fold.new_folder(tmp_path / "link" / "caps", "pyspy-dump", now=0.0, host="box") as f:
        f.write("x", b"1")
        assert f.real_path() == tmp_path / "real" / "caps" / f.name
    assert (tmp_path / "real" / "caps" / f.name / "x").exists()


def test_a_relative_root_with_dot_dot_resolves_from_here(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    with fold.new_folder(Path("../b/caps"), "pyspy-dump", now=0.0, host="box") as f:
        assert f.real_path() == tmp_path / "b" / "caps" / f.name


def test_a_root_that_is_a_file_says_so(tmp_path):
    (tmp_path / "caps").write_text("")
    with pytest.raises(CaptureError, match=f"cannot open {tmp_path / 'caps'}: Not a directory"):
        fold.new_folder(tmp_path / "caps", "pyspy-dump")


@root_only
def test_a_root_of_another_user_is_refused(tmp_path):
    root = tmp_path / "caps"
    root.mkdir(mode=0o700)
    os.chown(root, NOBODY, NOBODY)
    assert refused(root).startswith(
        f"the capture folder {root} belongs to uid {NOBODY}, not to you: its owner could swap"
    )
    assert os.listdir(root) == []


@root_only
def test_a_folder_or_link_of_another_user_in_a_sticky_folder_is_refused(tmp_path):
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    (sticky / "theirs").mkdir(mode=0o755)
    os.chown(sticky / "theirs", NOBODY, NOBODY)
    assert refused(sticky / "theirs" / "caps").startswith(
        f"{sticky / 'theirs'} is a folder of uid {NOBODY} in a folder every user may write"
    )
    os.symlink(tmp_path, sticky / "link")
    os.lchown(sticky / "link", NOBODY, NOBODY)
    assert refused(sticky / "link" / "caps").startswith(
        f"{sticky / 'link'} is a symlink of uid {NOBODY} in a folder every user may write"
    )
    assert not (sticky / "theirs" / "caps").exists() and not (tmp_path / "caps").exists()
