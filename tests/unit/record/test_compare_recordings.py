"""`gputop compare A B` over two recordings of a job (the second with its DataLoader given
workers and slower after step 700), `diagnose --baseline FILE`'s reading of one, and `gputop
history` over the memory: what a user reads, from the commands."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import jsonschema
import pytest
from builders import agent, device, gpu_sample, step

from gputop import cli, schemas
from gputop.model.steps import AgentsSample
from gputop.record.reader import open_recording
from gputop.record.recorded_run import recorded_run
from gputop.record.writer import Recorder
from gputop.session import Session
from gputop.sinks import Sinks

T0 = 5000.0


def record(path: Path, data_ms, workers: int, seconds: int = 60, steps: bool = True) -> Path:
    """A recorded session of a job stepping 10 times a second, ``data_ms(n)`` of data wait."""
    clock = [T0]
    session = Session((device(0),), sinks=Sinks([Recorder(path, clock=lambda: clock[0])]),
                      clock=lambda: clock[0], wall=lambda: 1.7e9 + clock[0])  # fmt: skip
    session.start({"mode": "record", "pid": 100, "command": ["python", "train.py"]})
    history, t_ns = [], 0
    for k in range(1, seconds + 1):
        clock[0] = T0 + k
        session.gpu([gpu_sample(0, T0 + k)])
        for _ in range(10 if steps else 0):
            s = step(len(history), t_ns, {"forward": 80.0, "data_wait": data_ms(len(history))})
            history.append(s)
            t_ns += s.dur_ns
        a = agent(100, tuple(history[-300:]), argv=("train.py", "--num-workers", str(workers)),
                  cwd="/proj", fingerprint={"dataloader": {"num_workers": workers}})  # fmt: skip
        session.agents(AgentsSample(100, T0 + k, 1.7e9 + T0 + k, (a,)))
    assert session.close() == []
    return path


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("compare")
    a = record(root / "a.gputop", lambda n: 40.0, workers=0)
    b = record(root / "b.gputop", lambda n: 5.0 if n < 700 else 25.0, workers=4, seconds=100)
    return a, b


def test_compare_json_says_b_against_a(pair, capsys):
    a, b = pair
    assert cli.main(["compare", str(a), str(b), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, schemas.load("compare"))
    assert doc["same_job"]
    c = doc["comparison"]
    assert c["change"]["distinguishable"] and c["change"]["rel"] < 0
    assert c["step_s"]["before"] == pytest.approx(0.12, rel=0.01)
    assert {"name": "dataloader.num_workers", "before": "0", "after": "4"} in c["changed"]
    assert c["slices"][0]["slice"] == "data"
    (shift,) = doc["b"]["shifts"]
    assert abs(shift["step"] - 700) <= 3 and shift["slices"] == ["data"]
    assert doc["a"]["shifts"] == []


def test_compare_text_and_page(pair, capsys, tmp_path):
    a, b = pair
    assert cli.main(["compare", str(a), str(b)]) == 0
    text = capsys.readouterr().out
    assert "B vs A (" in text and "dataloader.num_workers 0 -> 4" in text
    assert "step time shifted at step 70" in text
    page = tmp_path / "c.html"
    assert cli.main(["compare", str(a), str(b), "--html", str(page)]) == 0
    assert stat.S_IMODE(os.stat(page).st_mode) == 0o600
    html = page.read_text()
    assert "<h1>gputop compare: B against A</h1>" in html and "<script" not in html


def test_a_recording_without_steps_to_compare_is_one_line(pair, tmp_path, capsys):
    empty = record(tmp_path / "e.gputop", lambda n: 1.0, workers=0, seconds=5, steps=False)
    assert cli.main(["compare", str(pair[0]), str(empty)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds no run to compare" in err[0]


def test_a_baseline_file_without_a_run_is_one_line(tmp_path):
    from gputop.commands.live_session import baseline_of
    from gputop.errors import CannotDo

    empty = record(tmp_path / "e.gputop", lambda n: 1.0, workers=0, seconds=5, steps=False)
    with pytest.raises(CannotDo, match="holds no run to compare with"):
        baseline_of(empty)


def test_a_recording_is_a_baseline_and_its_shift_is_in_its_report(pair, capsys):
    got = recorded_run(open_recording(pair[1]))
    assert got.run is not None and got.run.settings == {"dataloader.num_workers": "4"}
    assert got.run.key.script == "/proj/train.py" and got.run.run.steps > 900
    assert cli.main(["report", str(pair[1])]) == 0
    assert "Shifts of step time" in capsys.readouterr().out


def test_history_lists_forgets_and_says_an_empty_memory(pair, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert cli.main(["history"]) == 0
    assert capsys.readouterr().out.startswith("no job remembered yet in ")
    from gputop.history.store import Memory

    for path, run_id in ((pair[0], "a"), (pair[1], "b")):
        got = recorded_run(open_recording(path))
        assert got.run is not None
        Memory().keep(got.run, run_id)
    assert cli.main(["history"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("train.py --num-workers") and out[1] == "  /proj/train.py"
    assert len(out) == 4 and "steps" in out[2]
    assert cli.main(["history", "--json"]) == 0
    (job,) = json.loads(capsys.readouterr().out)
    assert job["script"] == "/proj/train.py" and len(job["runs"]) == 2
    assert cli.main(["history", "--forget", "train.py"]) == 0
    assert "forgot" in capsys.readouterr().out
    with pytest.raises(SystemExit) as gone:  # a usage error: said with the usage
        cli.main(["history", "--forget", "train.py"])
    assert gone.value.code == 2
    assert "no remembered job runs 'train.py'" in capsys.readouterr().err
