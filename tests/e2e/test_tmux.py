"""`gputop demo` in a real terminal: tmux runs it, send-keys types, capture-pane reads the screen.

Checks what a person would: the SIMULATED board shows, theme switch, pause, help, and that
quitting (or the ssh link dropping: SIGHUP) gives the shell back in a sane state.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests_support import longest_blank, until, until_or_none

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


class Tmux:
    def __init__(self, tmp: Path, width: int = 100, height: int = 30) -> None:
        self.socket = f"gputop-test-{uuid.uuid4().hex[:8]}"
        self.tmp = tmp
        env = {**os.environ, "PS1": "READY$ ", "TERM": "xterm-256color"}
        env.pop("TMUX", None)
        self.env = env
        self._tmux(
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            str(width),
            "-y",
            str(height),
            "env PS1='READY$ ' bash --norc --noprofile",
        )

    def _tmux(self, *args: str) -> str:
        out = subprocess.run(
            ["tmux", "-L", self.socket, *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=20,
            check=True,
        )
        return out.stdout

    def type(self, text: str, enter: bool = True) -> None:
        self._tmux("send-keys", "-t", "t", "-l", text)
        if enter:
            self._tmux("send-keys", "-t", "t", "Enter")

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", "t", *keys)

    def screen(self, escapes: bool = False) -> str:
        """What the pane shows; ``escapes``: with the SGR sequences that colour it."""
        return self._tmux("capture-pane", "-p", *(["-e"] if escapes else []), "-t", "t")

    def wait_for(self, text: str, timeout: float = 20.0) -> str:
        screen = until_or_none(lambda: s if text in (s := self.screen()) else "", timeout, 0.1)
        if screen is None:
            raise AssertionError(f"{text!r} never appeared; screen was:\n{self.screen()}")
        return screen

    def wait_gone(self, text: str, timeout: float = 20.0) -> str:
        # a screen without the text is never empty: the prompt or a frame stays
        screen = until_or_none(lambda: s if text not in (s := self.screen()) else "", timeout, 0.1)
        if screen is None:
            raise AssertionError(f"{text!r} never went away; screen was:\n{self.screen()}")
        return screen

    def resize(self, width: int, height: int) -> None:
        self._tmux("resize-window", "-t", "t", "-x", str(width), "-y", str(height))

    def wait_filled(self, height: int, timeout: float = 60.0) -> str:
        """The screen once it is ``height`` rows with no more than 2 empty rows in a row (the
        rows are shared out a frame after the panes are drawn: polled, never assumed)."""

        def filled() -> str:
            screen = self.screen()
            rows = screen.split("\n")[:height]
            full = len(rows) == height and "SIMULATED" in screen and longest_blank(rows) <= 2
            return screen if full else ""

        screen = until_or_none(filled, timeout, every=0.2)
        if screen is None:
            raise AssertionError(f"a block of empty rows stayed; screen was:\n{self.screen()}")
        return screen

    def kill(self) -> None:
        """The server and every process still running in its panes: a program that outlives its
        terminal would otherwise keep a core busy for the rest of the run (a `gputop demo` of
        this module was found at 93% of a core 40 minutes after its test passed)."""
        import psutil

        listed = subprocess.run(["tmux", "-L", self.socket, "list-panes", "-a", "-F",
                                 "#{pane_pid}"], capture_output=True, text=True)  # fmt: skip
        left: list[psutil.Process] = []
        for pid in listed.stdout.split():
            with contextlib.suppress(psutil.Error, ValueError):
                left += psutil.Process(int(pid)).children(recursive=True)
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)
        for proc in left:
            with contextlib.suppress(psutil.Error):
                proc.kill()


def shell(tmp: Path, width: int = 100, height: int = 30) -> Iterator[Tmux]:
    """A fixture's body: a terminal of that size at its prompt, its server gone afterwards."""
    t = Tmux(tmp, width, height)
    t.wait_for("READY$")
    yield t
    t.kill()


@pytest.fixture
def tmux(tmp_path):
    yield from shell(tmp_path)


def demo_command(tmp: Path, pidfile: Path | None = None) -> str:
    config = tmp / "config.toml"
    config.write_text("# empty: defaults only, whatever the developer's own config says\n")
    cmd = f"{sys.executable} -m gputop demo --board h100x2 --scenario power-throttled"
    cmd += f" --interval 0.5 --config {config}"
    if pidfile:
        return f"sh -c 'echo $$ > {pidfile}; exec {cmd}'"
    return cmd


def test_demo_fills_a_tall_terminal_and_follows_its_size(tmp_path):
    """Eight GPUs at 120x40 take the free rows with their history; at 200x50 too, and back."""
    config = tmp_path / "config.toml"
    config.write_text("# defaults only\n")
    t = Tmux(tmp_path, 120, 40)
    try:
        t.wait_for("READY$")
        t.type(f"{sys.executable} -m gputop demo --interval 0.5 --config {config}")
        screen = t.wait_filled(40)
        assert "held" in screen and "SMact" in screen  # the GPUs' history lines
        t.resize(200, 50)
        t.wait_filled(50)
        t.resize(120, 40)
        t.wait_filled(40)
        t.keys("q")
        t.wait_for("READY$")
    finally:
        t.kill()


def assert_shell_is_sane(tmux: Tmux) -> None:
    tmux.type("clear; stty -a | tr ' ' '\\n' | grep -E '^-?(icanon|echo)$' | tr '\\n' ' '; echo")
    screen = tmux.wait_for("icanon")
    assert "-icanon" not in screen and "-echo " not in screen, screen
    tmux.type("echo back-in-the-shell")
    tmux.wait_for("back-in-the-shell\nREADY$")


def test_demo_keys_in_a_real_terminal(tmux, tmp_path):
    tmux.type(demo_command(tmp_path))
    tmux.wait_for("SIMULATED 2x H100 80GB HBM3")
    tmux.wait_for("held: POWER CAP")
    tmux.wait_for("q Quit")  # the key bar
    tmux.keys("t")
    tmux.wait_for("theme: gputop-light")
    tmux.keys("Space")
    tmux.wait_for("PAUSED")
    tmux.keys("?")
    help_screen = tmux.wait_for("Keys (escape closes")
    assert "write the current state as JSON" in help_screen
    tmux.keys("Escape")  # a lone escape: Textual waits ESCDELAY before taking it as a key
    tmux.wait_gone("Keys (escape closes")
    tmux.keys("Space")
    tmux.wait_gone("PAUSED")
    tmux.keys("q")
    tmux.wait_for("READY$")
    assert "SIMULATED" not in tmux.screen()  # the alternate screen is gone
    assert_shell_is_sane(tmux)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_sighup_restores_the_terminal(tmux, tmp_path):
    pidfile = tmp_path / "pid"
    tmux.type(demo_command(tmp_path, pidfile))
    tmux.wait_for("SIMULATED")
    pid = int(pidfile.read_text())
    os.kill(pid, 1)  # SIGHUP, as when the ssh link drops
    until(lambda: _gone(pid), timeout=10, what="gputop to exit on SIGHUP")
    tmux.wait_for("READY$")
    assert_shell_is_sane(tmux)


def test_attached_to_a_process_on_a_machine_with_no_gpu_driver(tmux, tmp_path):
    """No NVIDIA driver is not no verdict: `gputop --pid P` starts, says the GPUs are missing
    in one line, and judges the job from its process tree and stacks."""
    if Path("/proc/driver/nvidia").exists():
        pytest.skip("this machine has an NVIDIA driver")
    examples = Path(__file__).resolve().parents[2] / "examples"
    job = subprocess.Popen(
        [sys.executable, str(examples / "mlp_plain.py"), "--steps", "100000", "--seconds", "60"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        config = tmp_path / "config.toml"
        config.write_text("# defaults only\n")
        tmux.type(f"{sys.executable} -m gputop --pid {job.pid} --interval 0.5 --config {config}")
        screen = tmux.wait_for("no GPU data", timeout=30)
        assert f"pid {job.pid}" in screen and "no GPU" in screen
        screen = tmux.wait_gone("waiting for readings", timeout=30)
        assert "verdict" in screen
        tmux.keys("q")
        tmux.wait_for("READY$")
        assert job.poll() is None, "the job must keep running after gputop leaves"
    finally:
        job.kill()
        job.wait()


@pytest.fixture
def tmux80(tmp_path):
    yield from shell(tmp_path, 80, 24)


def test_demo_at_80x24_shows_its_keys_the_selected_gpu_and_quits_on_ctrl_c(tmux80, tmp_path):
    """Issue 18 item 5: at 80x24 the key bar ended at "s Sav", j/k showed nothing, keys that
    cannot work did nothing, and ctrl+c did not quit."""
    tmux = tmux80
    tmux.type(demo_command(tmp_path))
    tmux.wait_for("held: POWER CAP")
    screen = tmux.wait_for("? more keys")  # the key bar names where the rest are
    assert "q Quit" in screen and "v Why" in screen
    assert "▶ 0 H100" in screen and "▶ 1 H100" not in screen
    tmux.keys("j")
    screen = tmux.wait_for("▶ 1 H100")
    assert "▶ 0 H100" not in screen
    tmux.keys("f")  # no target: says why instead of nothing
    tmux.wait_for("f (Flame): needs a target")
    tmux.keys("h")
    help_screen = tmux.wait_for("Keys (escape closes")
    assert "leave gputop, restoring the terminal (F10 as in htop)" in help_screen  # one line
    tmux.keys("h")
    tmux.wait_gone("Keys (escape closes")
    tmux.keys("C-c")
    tmux.wait_for("READY$")
    assert "SIMULATED" not in tmux.screen()
    assert_shell_is_sane(tmux)


def test_f10_quits_the_demo(tmux, tmp_path):
    tmux.type(demo_command(tmp_path))
    tmux.wait_for("SIMULATED")
    tmux.keys("F10")
    tmux.wait_for("READY$")
    assert "SIMULATED" not in tmux.screen()


def test_run_says_the_job_ended_with_its_status_and_offers_q(tmux80, tmp_path):
    """Issue 18 item 8: after the job of `gputop run` exits the screen says so, with its
    status, offers q, and names GPU rows only where there are some."""
    tmux = tmux80
    config = tmp_path / "config.toml"
    config.write_text("# defaults only\n")
    job = tmp_path / "job.py"
    job.write_text("import time\ntime.sleep(1)\nraise SystemExit(3)\n")
    cmd = f"{sys.executable} -m gputop run --interval 0.5 --config {config} --"
    tmux.type(f"{cmd} {sys.executable} {job}; echo gputop-said-$?")
    tmux.wait_for("the job ended (status 3): q quits", timeout=60)
    # the status line reads the job's own status; the host pane says it from its next reading
    screen = tmux.wait_for("exited with status 3")
    if not Path("/proc/driver/nvidia").exists():  # no GPU rows: none "go on"
        assert "GPU rows" not in screen and "GPU panes" not in screen
    tmux.keys("q")
    screen = tmux.wait_for("gputop-said-3")
    assert "the job exited with status 3" in screen


def test_demo_trainer_that_dies_at_start_says_why_and_exits_with_its_status(tmux80, tmp_path):
    """Issue 18 item 3: a trainer the demo started that ends at once (here: a knob it does not
    know) is shown as ended on the screen; after q its last lines and status are printed and
    the demo exits with that status."""
    tmux = tmux80
    config = tmp_path / "config.toml"
    config.write_text("# defaults only\n")
    cmd = f"{sys.executable} -m gputop demo --config {config} --trainer=--no-such-knob"
    tmux.type(f"{cmd}; echo demo-said-$?")
    tmux.wait_for("the job ended (status 2): q quits", timeout=60)
    tmux.keys("q")
    screen = tmux.wait_for("demo-said-2")
    assert "unrecognized arguments: --no-such-knob" in screen  # the trainer's own last line
    assert "the trainer exited with status 2" in screen


def test_without_a_terminal_the_screen_does_not_start(tmux80, tmp_path):
    """Issue 18 item 4: stdin from /dev/null and stdout into a pipe, from a real shell: one
    line, exit 1, and the shell is back at once (Textual used to spin a core for minutes)."""
    tmux = tmux80
    status = "${PIPESTATUS[0]}"
    tmux.type(f"{sys.executable} -m gputop demo </dev/null | cat; echo demo-said-{status}")
    screen = tmux.wait_for("demo-said-1", timeout=30)
    assert "the live screen needs a terminal" in screen
    assert_shell_is_sane(tmux)


SGR = re.compile(r"\x1b\[([0-9;:]*)m")
BLACK_AND_WHITE = {"30", "37", "40", "47", "90", "97", "100", "107"}
"""Black, white and grey in the 16 colours: all that the mono theme draws with (its levels are
bold, reverse and underline). Greyscale from 256 or true colours is a coloured theme
greyed, whose yellow and red come out as greys that cannot be told apart."""


def colours(screen: str) -> set[str]:
    """The colours (foreground or background: 16, 256 or true colour) that a screen's SGR
    sequences set; attributes (bold, reverse) and the default colours are not colours."""
    found = set()
    for params in SGR.findall(screen):
        codes = params.replace(":", ";").split(";")
        i = 0
        while i < len(codes):
            code = codes[i]
            if code in ("38", "48"):  # extended: 5;N or 2;R;G;B
                span = 3 if codes[i + 1 : i + 2] == ["5"] else 5
                found.add(";".join(codes[i : i + span]))
                i += span
                continue
            n = int(code) if code.isdigit() else 0
            if 30 <= n <= 37 or 40 <= n <= 47 or 90 <= n <= 97 or 100 <= n <= 107:
                found.add(code)
            i += 1
    return found


def test_no_color_draws_the_demo_in_black_and_white(tmux, tmp_path):
    tmux.type(demo_command(tmp_path))
    tmux.wait_for("held: POWER CAP")
    assert colours(tmux.screen(escapes=True)) - BLACK_AND_WHITE  # colours without NO_COLOR
    tmux.keys("q")
    tmux.wait_for("READY$")
    tmux.type("clear; NO_COLOR=1 " + demo_command(tmp_path))
    tmux.wait_for("held: POWER CAP")
    time.sleep(1.0)  # pacing: two refreshes at --interval 0.5 for a colour to show (none may)
    screen = tmux.screen(escapes=True)
    assert colours(screen) <= BLACK_AND_WHITE, sorted(colours(screen) - BLACK_AND_WHITE)
    tmux.keys("q")
    tmux.wait_for("READY$")
