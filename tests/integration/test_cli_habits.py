"""The flags and files people expect from a tool like nvitop, py-spy and memray: -p, -V, a GPU
filter, NO_COLOR, shell completion, a man page and the schemas --help names, each as a user
runs it (a real subprocess, from outside the checkout)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import jsonschema
import pytest

from gputop import DISTRIBUTION, __version__, schemas
from gputop.commands import SUBCOMMANDS
from gputop.commands.man import ENVIRONMENT
from gputop.errors import exit_status_table
from gputop.resources import DOCS

OUTSIDE = tempfile.gettempdir()
REPO = Path(__file__).resolve().parents[2]


def gputop(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gputop", *args], capture_output=True,
                          text=True, timeout=60, cwd=OUTSIDE, env=env)  # fmt: skip


def test_version_says_the_command_and_the_name_to_install_it_by():
    for flag in ("-V", "--version"):
        r = gputop(flag)
        assert r.returncode == 0
        assert r.stdout.strip() == f"gputop {__version__} (distribution {DISTRIBUTION})"
    pyproject = (REPO / "pyproject.toml").read_text()
    assert f'name = "{DISTRIBUTION}"' in pyproject
    assert f'{DISTRIBUTION} = "gputop.cli:main"' in pyproject  # `pipx run gputop-why` works


def test_dash_p_is_the_pid_wherever_a_pid_is_taken():
    gone = "999999999"
    for args in (["-p", gone, "--once"], ["diagnose", "-p", gone, "--duration", "1"],
                 ["snapshot", "-p", gone], ["record", "-p", gone, "-o", "x.gputop"],
                 ["capture", "-p", gone, "pyspy-dump"]):  # fmt: skip
        r = gputop(*args, "--sim-board", "t4") if args[0] != "capture" else gputop(*args)
        assert r.returncode == 1, (args, r.stderr)
        assert "999999999" in r.stderr and "Traceback" not in r.stderr, args


@pytest.mark.parametrize("name", schemas.SCHEMAS)
def test_every_schema_the_help_names_is_printed_by_the_installed_gputop(name):
    r = gputop("schema", name)
    assert r.returncode == 0, r.stderr
    schema = json.loads(r.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema == schemas.load(name)


def test_every_document_the_help_names_is_printed_and_shipped_in_the_wheel():
    pyproject = (REPO / "pyproject.toml").read_text()
    listing = gputop("docs")
    assert listing.returncode == 0, listing.stderr
    for name, file in DOCS.items():
        assert f'"docs/{file}" = "gputop/docs/{file}"' in pyproject, file  # in the wheel
        doc = gputop("docs", name)
        assert doc.returncode == 0 and doc.stdout == (REPO / "docs" / file).read_text(), name
        assert re.search(rf"^{re.escape(name)} +\S", listing.stdout, re.M), name
    helps = " ".join(gputop(c.NAME, "--help").stdout for c in SUBCOMMANDS)
    helps += gputop("--help").stdout
    named = set(re.findall(r"`gputop docs ([a-z-]+)`", " ".join(helps.split())))
    assert named and named <= set(DOCS)


def test_the_json_flags_help_names_the_schema_command():
    for command, name in (("diagnose", "diagnose"), ("snapshot", "snapshot"), ("report", "report")):
        text = " ".join(gputop(command, "--help").stdout.split())
        assert f"`gputop schema {name}`" in text and f"`gputop docs {name}`" in text, command
        assert "docs/" not in text, command  # an installed gputop has no docs folder


def test_a_snapshot_validates_against_its_schema_and_only_chosen_gpus_appear():
    r = gputop("snapshot", "--json", "--sim-board", "h100x8", "--only", "1,6")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, schemas.load("snapshot"))
    assert [d["index"] for d in doc["devices"]] == [1, 6]


def test_no_color_means_mono_unless_colours_are_chosen(tmp_path):
    from gputop.cli import build_parser
    from gputop.commands.screen import ui_config

    def color(argv: list[str], environ: dict[str, str]) -> str:
        args = build_parser().parse_args(argv)
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(environ)
        try:
            return ui_config(args, terminal=False).color
        finally:
            os.environ.clear()
            os.environ.update(saved)

    plain = {"GPUTOP_CONFIG": str(tmp_path / "none.toml")}
    assert color([], plain) == "auto"
    assert color([], {**plain, "NO_COLOR": "1"}) == "mono"
    assert color([], {**plain, "NO_COLOR": ""}) == "auto"  # set but empty: no-color.org says no
    assert color(["--color", "256"], {**plain, "NO_COLOR": "1"}) == "256"  # a flag wins
    assert color(["--low-bandwidth"], {**plain, "NO_COLOR": "1"}) == "mono"
    config = tmp_path / "config.toml"
    config.write_text('color = "16"\n')
    assert color([], {"GPUTOP_CONFIG": str(config), "NO_COLOR": "1"}) == "16"  # so does the file


BASH_COMPLETE = r"""
eval "$(gputop completion bash)"
comp() {
  COMP_LINE="$1"; COMP_POINT=${#COMP_LINE}
  read -ra COMP_WORDS <<< "$COMP_LINE"
  [[ "$COMP_LINE" == *" " ]] && COMP_WORDS+=("")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMPREPLY=()
  _python_argcomplete gputop "${COMP_WORDS[-1]}" "${COMP_WORDS[-2]}"
  echo "${COMPREPLY[*]}"
}
comp "gputop diag"
comp "gputop diagnose --sim-b"
comp "gputop diagnose -p "
"""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completes_commands_flags_and_the_pids_of_python_processes(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "gputop"
    launcher.write_text(f'#!/bin/sh\nexec {sys.executable} -m gputop "$@"\n')
    launcher.chmod(0o755)
    trainer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
        r = subprocess.run(["bash", "-c", BASH_COMPLETE], capture_output=True, text=True,
                           timeout=120, env=env, cwd=OUTSIDE)  # fmt: skip
    finally:
        trainer.kill()
        trainer.wait()
    assert r.returncode == 0, r.stderr
    commands, flag, pids = (line.split() for line in r.stdout.splitlines())
    assert commands == ["diagnose"] and flag == ["--sim-board"]
    assert str(trainer.pid) in pids  # this user's Python processes, newest first


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_code_for_each_shell_registers_both_commands(shell):
    r = gputop("completion", shell)
    assert r.returncode == 0, r.stderr
    for command in ("gputop", "gputop-why"):
        assert re.search(rf"\b{command}\b", r.stdout), (shell, command)


def test_the_man_page_is_the_parser_and_says_environment_and_exit_status():
    r = gputop("man")
    assert r.returncode == 0, r.stderr
    page = r.stdout
    assert page.startswith('.TH GPUTOP "1"')
    for c in SUBCOMMANDS:
        assert f"\\fI\\,{c.NAME}\\/\\fR" in page, c.NAME
    for flag in ("only", "pid", "stacks\\-budget", "sim\\-board"):
        assert f"\\-\\-{flag}" in page, flag
    for name, _ in ENVIRONMENT:
        assert f"\\fB{name}\\fR" in page
    if shutil.which("man") and shutil.which("groff"):
        shown = subprocess.run(["man", "-l", "-"], input=page, capture_output=True, text=True,
                               timeout=60, env={**os.environ, "MANWIDTH": "100"})  # fmt: skip
        assert shown.returncode == 0 and "EXIT STATUS" in shown.stdout, shown.stderr
    for status, _ in exit_status_table():
        assert f".TP\n\\fB{status}\\fR\n" in page, status


def test_the_readme_exit_status_table_is_the_error_familys():
    """README.md's table is written by hand; it must say what gputop.errors says (the table to
    paste is printed when it does not)."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("### Exit status\n", 1)[1].split("\n#", 1)[0]
    rows = [tuple(cell.strip() for cell in line.strip().strip("|").split("|"))
            for line in section.splitlines()
            if line.startswith("|") and not set(line) <= set("|-: ")]  # fmt: skip
    expected = exit_status_table()
    table = "\n".join(f"| {status} | {meaning} |" for status, meaning in expected)
    assert rows[1:] == expected, (
        f"README.md's Exit status table should read:\n| status | meaning |\n|---|---|\n{table}"
    )
    assert rows[0] == ("status", "meaning")
