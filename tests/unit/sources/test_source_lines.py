"""One line of a job's source, read through /proc/PID/root, bounded, never blocking
(``sources/source_lines.py``)."""

from __future__ import annotations

import os

from gputop.sources.source_lines import MAX_LINE, code_line


def test_the_line_is_read_stripped_and_made_printable(tmp_path):
    src = tmp_path / "train.py"
    src.write_text("import re\n    ids = WORD.findall(text)  \nx = '\x1b[31m'\n")
    pid = os.getpid()
    assert code_line(pid, str(src), 2) == "ids = WORD.findall(text)"
    assert "\x1b" not in code_line(pid, str(src), 3)
    assert code_line(pid, str(src), 9) == ""  # past the end


def test_a_fifo_a_symlink_and_a_long_line_are_no_trouble(tmp_path):
    fifo = tmp_path / "fifo.py"
    os.mkfifo(fifo)
    assert code_line(os.getpid(), str(fifo), 1) == ""  # never opened for reading: no block
    target = tmp_path / "real.py"
    target.write_text("secret = 1\n" + "y = " + "1" * 5000 + "\n")
    link = tmp_path / "link.py"
    link.symlink_to(target)
    assert code_line(os.getpid(), str(link), 1) == ""  # a final symlink is not followed
    assert len(code_line(os.getpid(), str(target), 2)) == MAX_LINE
    assert code_line(os.getpid(), "relative.py", 1) == ""
    assert code_line(2**22 + 7, str(target), 1) == ""  # no such process
