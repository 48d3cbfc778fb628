"""Replay reaches the last record (issue 17, the record/replay e2e test under load): the
playback's span ends at the last data frame's first record (or the last summary, which counts
no stacks reading), and the second of readings after it, with the verdicts on them, was never
applied: "End" and a replay at 1x stopped short of the recorded last verdict."""

from __future__ import annotations

from builders import device

from gputop.diagnose.findings import Evidence, Finding, Verdict
from gputop.diagnose.point import EvalPoint
from gputop.model.gpu import GpuSample
from gputop.record.playback import Playback
from gputop.record.reader import open_recording
from gputop.record.writer import Recorder


def _verdict(bound: str, now: float) -> Verdict:
    finding = Finding(bound, True, 0.7, f"{bound} holds", (Evidence("x 31%", "agent"),), ("try",))
    return Verdict(finding, (), (), now, "", ("NVML",))


def _killed_recording(tmp_path):
    """3 s, a reading and a verdict every 0.25 s, the verdict changing in the last second;
    the recorder killed after its last frame reached the disk (no closing summary)."""
    path = tmp_path / "killed.gputop"
    clock = [100.0]
    rec = Recorder(path, clock=lambda: clock[0])
    rec.start((device(0),), {"mode": "record"})
    for i in range(13):
        now = clock[0] = 100.0 + 0.25 * i
        rec.gpu([GpuSample(0, now, 1.7e9 + now, power_w=100.0 + i)])
        bound = "data-loading" if i < 10 else "gpu-compute"
        rec.verdict(EvalPoint(now, None, None), _verdict(bound, now))
    rec.drain()
    return open_recording(path)


def _last_bound(recording) -> str:
    verdicts = [r.value[1] for r in recording.records() if r.kind == "verdict"]
    return verdicts[-1].principal.bound


def _shown(playback: Playback) -> str | None:
    v = playback.session.state.verdict
    return v.principal.bound if v is not None and v.principal else None


def test_seeking_to_the_end_plays_every_record(tmp_path):
    recording = _killed_recording(tmp_path)
    last = max(r.t for r in recording.records()) - recording.span()[0]
    playback = Playback(recording)
    assert last > playback.total  # what the span cannot see without decompressing
    playback.seek(playback.total)
    assert playback.ended and _shown(playback) == _last_bound(recording) == "gpu-compute"


def test_a_replay_at_1x_ends_on_the_last_recorded_verdict(tmp_path):
    recording = _killed_recording(tmp_path)
    playback = Playback(recording, speed=1.0)
    for _ in range(1000):  # ticks of 0.1 s: far more than the 3 s it lasts
        if not playback.playing:
            break
        playback.tick(0.1)
    assert playback.ended and playback.status == "end"
    assert _shown(playback) == "gpu-compute"
