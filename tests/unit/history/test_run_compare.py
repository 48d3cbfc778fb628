"""This run against the job's last: the step's change with its interval, the slices that moved,
what changed in the setup and arguments, and the last run's lever recognised when a changed
setting is a knob of the slice it saves from."""

from __future__ import annotations

from gputop.diagnose import Mean, Remembered, RememberedLever, RunSummary, compare, flat_settings
from gputop.diagnose.run_compare import slice_of_setting
from gputop.model.job_key import job_key
from gputop.vocab import budget as b


def summary(step_s: float, data: float, error: float = 0.001, steps: int = 400) -> RunSummary:
    shares = dict.fromkeys(b.SLICES, (0.0, 0.0))
    shares[b.DATA] = (data, 0.01)
    shares[b.COMPUTE] = (1 - data, 0.01)
    return RunSummary(Mean(step_s, error, steps), shares)


KEY = job_key(["train.py", "--num-workers", "0", "--lr", "0.1"], "/p", 1)
LEVER = RememberedLever("Raise DataLoader num_workers", b.DATA, 0.2, 0.15, 0.25)


def last(**kw) -> Remembered:
    settings = {"dataloader.num_workers": "0", "torch": "2.13.0"}
    fields = dict(key=KEY, started=1.7e9, ended=1.7e9 + 600, run=summary(0.412, 0.40),
                  settings=settings, principal="data-bound", lever=LEVER,
                  version="0.1.0")  # fmt: skip
    return Remembered(**{**fields, **kw})


def test_a_lever_applied_on_the_command_line_is_recognised_with_its_prediction():
    now_key = job_key(["train.py", "--num-workers", "4", "--lr", "0.1"], "/p", 1)
    c = compare(last(settings={}), summary(0.336, 0.08), now_key, {})
    assert c.step.distinguishable and -0.19 < c.step.rel < -0.17
    assert c.changed == (("--num-workers", "0", "4"),)
    assert c.lever is not None and c.lever.setting == "--num-workers" and c.lever.lever is LEVER
    assert [s.name for s in c.slices] == [b.DATA, b.COMPUTE]


def test_a_lever_applied_in_the_setup_is_recognised_and_other_changes_named():
    c = compare(last(), summary(0.34, 0.1), KEY, {"dataloader.num_workers": "4", "torch": "2.14.0"})
    assert c.lever is not None and c.lever.setting == "dataloader.num_workers"
    assert ("torch", "2.13.0", "2.14.0") in c.changed


def test_a_change_that_is_no_knob_of_the_levers_slice_is_not_the_lever():
    now_key = job_key(["train.py", "--num-workers", "0", "--lr", "0.2"], "/p", 1)
    c = compare(
        last(), summary(0.41, 0.40), now_key, {"dataloader.num_workers": "0", "torch": "2.13.0"}
    )
    assert c.lever is None
    assert c.changed == (("--lr", "0.1", "0.2"),)
    assert not c.step.distinguishable


def test_settings_words_name_their_slice():
    assert slice_of_setting("dataloader.pin_memory") == b.H2D
    assert slice_of_setting("--eval-every") == b.EVAL
    assert slice_of_setting("parallel.bucket_cap_mb") == b.COMMS
    assert slice_of_setting("--lr") is None
    assert slice_of_setting("--balanced") == b.STRAGGLER  # a long stem names its words
    assert slice_of_setting("--logits-scale") is None  # a short one only itself


def test_the_setup_is_kept_flat_without_the_environment():
    fp = {"OMP_NUM_THREADS": "8", "compiled": False, "dataloader": {"num_workers": 4, "x": [1]},
          "parallel": {"kind": "DDP", "bucket_cap_mb": 25}}  # fmt: skip
    assert flat_settings(fp) == {
        "compiled": "False",
        "dataloader.num_workers": "4",
        "parallel.kind": "DDP",
        "parallel.bucket_cap_mb": "25",
    }


def test_failing_a_word_the_one_change_that_shrank_the_levers_slice_is_the_lever():
    now_key = job_key(["train.py", "--num-workers", "0", "--lr", "0.1", "--fast-io"], "/p", 1)
    c = compare(last(settings={}), summary(0.3, 0.1), now_key, {})
    assert c.lever is not None and c.lever.setting == "--fast-io" and not c.lever.by_words
    # two unnamed changes: which one did it is not known
    two = job_key(["train.py", "--num-workers", "0", "--lr", "0.2", "--fast-io"], "/p", 1)
    assert compare(last(settings={}), summary(0.3, 0.1), two, {}).lever is None
    # the slice did not shrink: the change was not the lever
    assert compare(last(settings={}), summary(0.41, 0.40), now_key, {}).lever is None


def test_a_lever_the_budget_could_not_size_is_still_named_without_an_estimate(tmp_path):
    from gputop.history.store import Memory
    from gputop.render.compare import comparison_doc, comparison_lines

    unsized = RememberedLever("DDP bucket_cap_mb=25 -> 50", b.COMMS, None, None, None)
    before = last(lever=unsized, settings={"parallel.bucket_cap_mb": "25"})
    Memory(tmp_path).keep(before, "a")
    assert Memory(tmp_path).last(KEY) == before  # kept and read back without an estimate
    c = compare(before, summary(0.40, 0.40), KEY, {"parallel.bucket_cap_mb": "50"})
    assert c.lever is not None and c.lever.setting == "parallel.bucket_cap_mb"
    doc = comparison_doc(c)
    assert doc["lever"]["predicted"] is None and doc["lever"]["predicted_mid"] is None
    (line,) = [x for x in comparison_lines(doc) if "last run's lever" in x]
    assert "predicted no estimate (the budget could not size it)" in line
