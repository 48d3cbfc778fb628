"""The capture root as it is (``capture/listing.py``): captures listed oldest first with their
trigger and size, the disk budget kept by removing the oldest armed captures that are done,
never one taken by hand, a running one or a folder that is not a capture; and everything in the
root read as if another user had crafted it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gputop.capture import manifest
from gputop.capture.folder import CaptureError, new_folder
from gputop.capture.listing import MAX_MANIFEST, listing, prune
from gputop.capture.manifest import Manifest
from gputop.cli import main

KIB = 1024


def make(root: Path, at: float, trigger: str | None, size: int, status: str = "ok") -> str:
    """A capture folder as ``take`` leaves one: its manifest and a file of ``size`` bytes."""
    with new_folder(root, "pyspy-dump", now=at, host="node") as folder:
        m = Manifest(
            id=folder.name,
            kind="pyspy-dump",
            bounds={},
            requested_at=at,
            trigger={"trigger": trigger, "why": f"{trigger} fired"} if trigger else None,
        )
        manifest.write(folder, m.ended(status) if status != "running" else m)
        folder.write("stacks.txt", b"x" * size)
        return folder.name


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "caps"
    r.mkdir(mode=0o700)
    return r


def test_captures_are_listed_oldest_first_with_trigger_and_size(root):
    by_hand = make(root, 1_000, None, 10 * KIB)
    armed = make(root, 2_000, "hung", 20 * KIB)
    kept = listing(root)
    assert [k.name for k in kept] == [by_hand, armed]
    assert [(k.trigger, k.armed) for k in kept] == [(None, False), ("hung", True)]
    assert kept[1].why == "hung fired" and kept[1].bytes > 20 * KIB  # the manifest too


def test_the_oldest_armed_captures_go_first_and_never_one_taken_by_hand(root):
    old_hand = make(root, 1_000, None, 100 * KIB)
    old_armed = make(root, 2_000, "straggler", 100 * KIB)
    running = make(root, 2_500, "regression", 100 * KIB, status="running")
    mid_armed = make(root, 3_000, "regression", 100 * KIB)
    new_armed = make(root, 4_000, "hung", 100 * KIB)
    removed = prune(root, budget_bytes=320 * KIB)
    assert [k.name for k in removed] == [old_armed, mid_armed]
    assert sorted(os.listdir(root)) == sorted([old_hand, running, new_armed])
    assert prune(root, budget_bytes=0, keep=frozenset({new_armed})) == []  # only by hand left
    assert sorted(os.listdir(root)) == sorted([old_hand, running, new_armed])


def test_a_root_that_does_not_exist_is_empty_and_the_command_says_so(tmp_path, capsys):
    assert listing(tmp_path / "none") == []
    assert main(["captures", "--dir", str(tmp_path / "none")]) == 0
    assert "no captures in" in capsys.readouterr().out


def test_crafted_folders_are_listed_as_such_and_never_removed(root):
    armed = make(root, 1_000, "hung", 10 * KIB)
    (root / "not-a-capture").mkdir()
    (root / "not-a-capture" / "data").write_bytes(b"y" * 50 * KIB)
    (root / "bad-json").mkdir()
    (root / "bad-json" / "manifest.json").write_bytes(b"{" * 5000)
    (root / "huge").mkdir()
    with open(root / "huge" / "manifest.json", "wb") as f:
        f.truncate(MAX_MANIFEST + 10)
    (root / "link").mkdir()
    os.symlink("/etc/passwd", root / "link" / "manifest.json")
    os.symlink("/etc", root / "a-link-to-etc")  # not a folder of the root: not even listed
    (root / "fake-armed").mkdir()  # a folder whose manifest is a trigger's in name only
    (root / "fake-armed" / "manifest.json").write_text('{"trigger": "hung"}')
    notes = {k.name: k.note for k in listing(root)}
    assert "a-link-to-etc" not in notes
    assert notes["not-a-capture"] == "no manifest.json: not a capture"
    assert notes["bad-json"] == "its manifest.json is not JSON"
    assert notes["huge"].startswith("its manifest.json is over")
    assert notes["link"].startswith("cannot read its manifest.json")
    removed = prune(root, budget_bytes=0)
    assert [k.name for k in removed] == [armed]
    assert sorted(os.listdir(root)) == sorted(
        ["not-a-capture", "bad-json", "huge", "link", "a-link-to-etc", "fake-armed"]
    )
    assert os.path.exists("/etc/passwd")


def test_a_link_inside_an_armed_capture_is_removed_not_followed(root, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("mine")
    name = make(root, 1_000, "hung", KIB)
    os.symlink(outside, root / name / "escape")
    assert [k.name for k in prune(root, budget_bytes=0)] == [name]
    assert (outside / "keep").read_text() == "mine"


def test_a_root_open_to_others_is_refused_with_one_line(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    (shared / "caps").mkdir(mode=0o700)  # another user could swap it for a link
    with pytest.raises(CaptureError, match="can be written by other users"):
        listing(shared / "caps")
