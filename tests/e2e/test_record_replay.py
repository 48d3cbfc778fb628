"""Record 30 s of `gputop demo` (with the real example trainer) in a real terminal, then replay
it: the verdicts seen live are the recorded ones, every recorded verdict recomputes equal from
the recorded readings, and the replay screen ends on the recorded verdict."""

from __future__ import annotations

import re
import subprocess
import sys
import time

from test_tmux import Tmux, tmux  # noqa: F401  (the fixture)
from tests_support import until_or_none

from gputop.record.playback import Playback
from gputop.record.reader import open_recording
from gputop.record.replay import check

RECORD_S = 20.0
"""Long enough for the demo's verdict to be shown and recorded, and evaluated often (at most
once a second); it was 60 s, then 30 s, of every CI run spent on a settled screen."""
VERDICT = re.compile(r"^\s*verdict\s+([A-Z][A-Z/-]+[A-Z])\b", re.MULTILINE)


def _shown(screen: str) -> str | None:
    """The principal bound the pane shows (not its WARMING UP tag: no bound, like a note)."""
    m = VERDICT.search(screen)
    return m.group(1).lower() if m and m.group(1) != "WARMING" else None


def _dedup(xs):
    out = []
    for x in xs:
        if x is not None and (not out or out[-1] != x):
            out.append(x)
    return out


def _is_subsequence(small, big) -> bool:
    it = iter(big)
    return all(any(x == y for y in it) for x in small)


def test_record_a_demo_then_replay_it(tmux, tmp_path):  # noqa: F811
    config = tmp_path / "config.toml"
    config.write_text("# defaults only\n")
    path = tmp_path / "demo.rec"
    knobs = "--workers 0 --read-latency-ms 40"
    tmux.type(
        f"{sys.executable} -m gputop demo --board h100x2 --trainer '{knobs}' --interval 1 "
        f"--config {config} --record {path}"
    )
    tmux.wait_for("SIMULATED", timeout=30)
    live = []
    deadline = time.monotonic() + RECORD_S
    while time.monotonic() < deadline:
        live.append(_shown(tmux.screen()))
        time.sleep(0.5)  # pacing: the live screen's verdict read twice a second while recording
    tmux.keys("q")
    tmux.wait_for("recorded to", timeout=30)

    out = subprocess.run([sys.executable, "-m", "gputop", "replay", "--check", str(path)],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "all equal" in out.stdout

    result = check(open_recording(path))
    recorded = _dedup(bound for _, bound in result.changes)
    seen = _dedup(live)
    assert seen, "no verdict was ever shown live"
    assert _is_subsequence(seen, recorded), (seen, recorded)
    # the live app evaluated all along: once a second at most, less often as its evaluations
    # grow costlier (Session.evaluate_share: a demo's cost ~6 ms each once its windows fill)
    assert result.evaluations > RECORD_S / 3

    # replay's own state at the end is the last recorded verdict (no terminal involved)
    final = recorded[-1] if recorded else None
    playback = Playback(open_recording(path), speed=64.0)
    playback.seek(playback.total)
    assert playback.ended and _bound(playback.session.state.verdict) == final

    # the replay screen plays it through and ends on the last recorded verdict
    tmux.type(f"{sys.executable} -m gputop replay {path} --speed 64 --config {config}")
    screen = tmux.wait_for("64x end", timeout=60)
    assert "REPLAY demo.rec" in screen
    _settles_on(tmux, final)
    tmux.keys("q")
    tmux.wait_for("READY$")


def _bound(verdict) -> str | None:
    return verdict.principal.bound if verdict is not None and verdict.principal else None


def _settles_on(term: Tmux, bound: str | None, timeout: float = 15.0) -> None:
    """Waits until the screen shows ``bound`` (a timeout fails the test). The banner ("64x
    end") is the top line of the frame that also redraws the verdict below it; tmux 3.3 does
    not take synchronised output, so on a busy machine capture-pane can read that frame half
    applied (the banner new, the verdict line still the one before: a verdict that changed in
    the last 6.4 s of the recording, one tick at 64x, read as the previous one)."""
    if until_or_none(lambda: _shown(term.screen()) == bound, timeout, every=0.2) is None:
        raise AssertionError(f"{bound!r} never shown; screen was:\n{term.screen()}")
