"""A job is the same job across its runs: its seeds, ports, output folders and time stamps do
not make it another, while its knobs stay in its arguments, to be named when they change."""

from __future__ import annotations

from gputop.model.job_key import HIDDEN, job_key, stable_args, volatile_option


def test_volatile_values_are_hidden_and_knobs_kept():
    args = ["--lr", "0.1", "--seed", "42", "--output_dir=/tmp/run-7", "--master-port", "29511",
            "--num-workers", "4", "--log-every", "10", "--run-name", "exp 3", "--eval-every=100",
            "--logging_dir", "runs/x", "data/train"]  # fmt: skip
    assert stable_args(args) == (
        "--lr", "0.1", "--seed", HIDDEN, f"--output_dir={HIDDEN}", "--master-port", HIDDEN,
        "--num-workers", "4", "--log-every", "10", "--run-name", HIDDEN, "--eval-every=100",
        "--logging_dir", HIDDEN, "data/train",
    )  # fmt: skip


def test_temporary_paths_and_stamps_are_hidden_wherever_they_stand():
    assert stable_args(["/tmp/tmpab12cd/data.bin", "--tag", "20261129-101500", "x"]) == (
        HIDDEN, "--tag", HIDDEN, "x",
    )  # fmt: skip
    assert stable_args(["--ckpt", "ckpt/0123456789abcdef"]) == ("--ckpt", HIDDEN)


def test_option_words():
    assert volatile_option("--save_dir") and volatile_option("--checkpoint-path")
    assert not volatile_option("--save-every") and not volatile_option("--log_interval")
    assert not volatile_option("--num_workers") and not volatile_option("--data-dir")


def test_the_key_is_the_script_where_it_ran_and_the_world_size():
    a = job_key(["train.py", "--seed", "1"], "/home/me/proj", 8)
    b = job_key(["/home/me/proj/./train.py", "--seed", "2", "--workers", "4"], "/elsewhere", 8)
    assert a is not None and b is not None
    assert a.id == b.id and a.script == "/home/me/proj/train.py"
    assert a.args != b.args
    other = job_key(["train.py"], "/home/me/other", 8)
    fewer = job_key(["train.py"], "/home/me/proj", 4)
    assert other is not None and fewer is not None
    assert len({a.id, other.id, fewer.id}) == 3
    assert job_key([], "/x", 1) is None and job_key([""], "/x", 1) is None
    inline = job_key(["-c", "print(1)"], "/x", None)
    assert inline is not None and inline.script == "-c" and inline.world_size == 1
    assert a.title == "train.py --seed * (8 ranks)"


def test_secrets_given_on_the_command_line_are_never_kept():
    args = ["--api-key", "abc", "--hf_token=xyz", "--password", "p",
            "hf_AbCdEf1234567890GhIjKl5678", "--max-tokens", "512", "--model",
            "bert-base-uncased"]  # fmt: skip
    assert stable_args(args) == ("--api-key", HIDDEN, f"--hf_token={HIDDEN}", "--password",
                                 HIDDEN, HIDDEN, "--max-tokens", "512", "--model",
                                 "bert-base-uncased")  # fmt: skip
