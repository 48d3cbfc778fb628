"""`gputop diagnose` is not silent while it runs: the timeline as it changes on a terminal, a
progress line on stderr when stdout is JSON or redirected, nothing extra on a pipe."""

from __future__ import annotations

import io

from gputop.headless import Diagnosis, Feedback, document, render


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def entry(t: float, bound: str | None) -> dict:
    return {"t_s": t, "bound": bound, "confidence": 0.7 if bound else 0.0, "note": "warming up"}


def run_through(feedback: Feedback) -> Diagnosis:
    d = Diagnosis(started=0.0)
    feedback.start("watching pid 7 for 10 s through NVML")
    feedback(d, 0.0)
    d.timeline.append(entry(1.0, None))
    d.label = "warming up"
    feedback(d, 1.0)
    d.timeline.append(entry(3.0, "data-input"))
    d.label = "data-input"
    feedback(d, 3.0)
    d.target_exit = {"t_s": 5.0, "pid": 7, "exit_code": None}
    feedback(d, 5.0)
    feedback.end()
    return d


def test_on_a_terminal_the_timeline_streams_and_is_not_printed_twice():
    out, err = Tty(), Tty()
    f = Feedback(out, err, 10.0, json_out=False)
    d = run_through(f)
    assert f.stream and not f.line
    assert err.getvalue() == "gputop: watching pid 7 for 10 s through NVML\n"
    lines = out.getvalue().splitlines()
    assert lines[0] == "gputop diagnose"
    assert "warming up" in lines[1] and "data-input  (70%)" in lines[2]
    assert "pid 7 exited: nothing more to watch" in lines[3]
    rest = render(document(d, {}), timeline=not f.stream)
    assert "data-input  (70%)" not in rest and "gputop diagnose" not in rest


def test_json_on_a_terminal_gets_a_progress_line_on_stderr_erased_at_the_end():
    out, err = Tty(), Tty()
    f = Feedback(out, err, 10.0, json_out=True)
    run_through(f)
    assert out.getvalue() == "" and f.line
    text = err.getvalue()
    assert "\rgputop: 3/10 s  data-input" in text
    assert text.endswith("\r")  # erased: the terminal is left clean for the JSON


def test_on_pipes_nothing_but_the_first_line():
    out, err = io.StringIO(), io.StringIO()
    f = Feedback(out, err, 10.0, json_out=False)
    run_through(f)
    assert out.getvalue() == ""
    assert err.getvalue() == "gputop: watching pid 7 for 10 s through NVML\n"
