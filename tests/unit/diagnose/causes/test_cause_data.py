"""The data wait's cause (``diagnose/causes/data.py``) through the whole verdict: who makes
the batches (workers, or the training thread with none) and what that work is made of, by
the kind of library its frames are in; the levers follow the kind, and none is offered for a
kind the frames do not show."""

from __future__ import annotations

from types import MappingProxyType as M

from builders import agent, host_window, proc_sample, stacks_window, step

from gputop.diagnose import evaluate, reduce_windows
from gputop.model.steps import AgentsSample

FETCH = ("torch/utils/data/_utils/fetch.py", "_MapDatasetFetcher.fetch")
WORKER_LOOP = ("torch/utils/data/_utils/worker.py", "_worker_loop")
TEXT = (("re/__init__.py", "findall"), ("data.py", "Sentences.__getitem__"), FETCH, WORKER_LOOP)
IMAGE = (("PIL/ImageFile.py", "ImageFile.load"), ("PIL/Image.py", "Image.convert"),
         ("data.py", "Photos.__getitem__"), FETCH, WORKER_LOOP)  # fmt: skip
OWN = (("data.py", "Rows.parse"), ("data.py", "Rows.__getitem__"), FETCH, WORKER_LOOP)
IDLE = (("multiprocessing/queues.py", "Queue.get"), WORKER_LOOP)
TEXT_LEVER = "tokenise once ahead of training"
IMAGE_WORDS = ("image", "decode", "augment", "torchvision", "DALI", "kornia")


def loader_job(workers: int, data_cpu: float | None = None) -> AgentsSample:
    """One process of 30 steps, 60 ms of them waiting for a batch, ``workers`` DataLoader
    workers (the agent's fingerprint); ``data_cpu``: the share of the wait it computed in."""
    fp = M({"dataloader": M({"num_workers": workers, "pin_memory": True,
                             "persistent_workers": True})})  # fmt: skip
    cpu = None if data_cpu is None else int(60e6 * data_cpu)
    steps = tuple(
        step(i, int(i * 75e6), {"data_wait": 60.0, "forward": 8.0, "backward": 6.0},
             data_cpu_ns=cpu)
        for i in range(30)
    )  # fmt: skip
    return AgentsSample(100, 1.0, 0.0, (agent(100, steps, fingerprint=fp),))


def verdict(workers: list[tuple[tuple[str, str], ...]], main=None, data_cpu=None, via="py-spy"):
    """Two CPUs; a worker per stack list given, each pegged."""
    procs = (proc_sample(100, "main", 0.4),
             *(proc_sample(200 + i, "worker", 0.97) for i in range(len(workers))))  # fmt: skip
    threads = {(200 + i, "worker"): [w] for i, w in enumerate(workers)}
    if main is not None:
        threads[(100, "main")] = main
    sig = reduce_windows([], [], host=host_window(procs, cpus=2.0),
                         agents=loader_job(len(workers), data_cpu),
                         stacks=stacks_window(threads, via=via))  # fmt: skip
    v, _ = evaluate(sig, now=10.0)
    assert v.principal is not None and v.principal.bound.startswith("data-input"), v.principal
    return v.principal


def test_workers_tokenising_text_are_named_with_the_frame_and_text_levers():
    p = verdict([TEXT, TEXT])
    assert p.cause is not None
    text = p.cause.text
    assert text.startswith("2 DataLoader workers cannot keep up (60 ms a step), each busy 97%")
    assert "100% in Sentences.__getitem__ (data.py:11) -> re/__init__.py:findall" in text
    assert "text normalising and tokenising" in text
    assert any(x.startswith(TEXT_LEVER) for x in p.levers), p.levers
    assert not any(w in x for x in p.levers for w in IMAGE_WORDS), p.levers


def test_workers_decoding_images_get_the_image_levers_and_no_text_ones():
    p = verdict([IMAGE, IMAGE])
    assert "Photos.__getitem__ (data.py:12) -> PIL/ImageFile.py:ImageFile.load" in p.cause.text
    assert "image decoding and augmentation" in p.cause.text
    assert p.levers[0].startswith("decode smaller"), p.levers
    assert not any("tokeni" in x for x in p.levers), p.levers


def test_the_jobs_own_python_is_named_and_no_library_kind_is_claimed():
    p = verdict([OWN, OWN, IDLE])
    assert "in Rows.parse (data.py:10): the job's own Python" in p.cause.text
    assert not any(w in x for x in p.levers for w in (*IMAGE_WORDS, "tokeni")), p.levers


def test_a_mixed_loader_names_each_kind_that_holds_a_sixth():
    p = verdict([TEXT, IMAGE, IMAGE])
    assert "image decoding" in p.cause.text  # the larger
    assert any(x.startswith(TEXT_LEVER) for x in p.levers)
    assert any(x.startswith("decode smaller") for x in p.levers)
    evidence = [e.text for e in p.cause.evidence]
    assert any("image decoding and augmentation 67%, text normalising and tokenising 33%" in e
               for e in evidence), evidence  # fmt: skip


def test_a_kinds_lever_saves_what_that_kind_takes_of_a_batch():
    """Three workers, a third of their samples in text: tokenising ahead makes each batch a
    third cheaper, a batch every 75 * 2/3 = 50 ms, so the 60-ms wait loses 25 ms (capped at
    the wait); the range follows the share's sampling error (3 samples: wide)."""
    p = verdict([TEXT, IMAGE, IMAGE])
    i = next(i for i, x in enumerate(p.levers) if x.startswith(TEXT_LEVER))
    got = p.lever_savings[i]
    assert got is not None and got.condition == (
        "if the text normalising and tokenising (33% of the samples) went"
    )
    assert abs(got.share - 25 / 75) < 0.02, got
    assert got.low < got.share <= got.high


def saturated_verdict(trainer_runq: float, cpus: float):
    """Two text workers pegged, the training process waiting ``trainer_runq`` s/s for a CPU."""
    procs = (proc_sample(100, "main", 0.6, runq=trainer_runq),
             *(proc_sample(200 + i, "worker", 0.97) for i in range(2)))  # fmt: skip
    threads = {(200 + i, "worker"): [TEXT] for i in range(2)}
    sig = reduce_windows([], [], host=host_window(procs, cpus=cpus), agents=loader_job(2),
                         stacks=stacks_window(threads))  # fmt: skip
    v, _ = evaluate(sig, now=10.0)
    assert v.principal is not None and v.principal.bound.startswith("data-input"), v.principal
    p = v.principal
    i = next(i for i, x in enumerate(p.levers) if x.startswith(TEXT_LEVER))
    return p.lever_savings[i]


def test_cheaper_batches_on_over_asked_cpus_also_give_the_trainer_its_cpu_back():
    """2.8 CPUs wanted of 2: the trainer, 0.6 of a core, waits 0.3 s/s for one, a third of
    the 15 ms a step it is not waiting for batches; the text gone, the workers free 1.9 CPUs
    (more than the 0.8 over): the 60-ms wait goes and 5 ms more, 65 of the 75-ms step."""
    got = saturated_verdict(0.3, cpus=2.0)
    assert got is not None and abs(got.share - 65 / 75) < 0.02, got
    assert "the training thread's wait for a CPU (5 ms a step)" in got.condition
    alone = saturated_verdict(0.3, cpus=8.0)  # the same wait, CPUs to spare: not the workers'
    assert alone is not None and abs(alone.share - 60 / 75) < 0.02, alone
    assert "wait for a CPU" not in alone.condition


def test_with_no_workers_the_training_thread_is_said_to_make_its_batches():
    next_batch = ("torch/utils/data/dataloader.py", "_BaseDataLoaderIter.__next__")
    main_fetch = [(*(x for x in TEXT if x != WORKER_LOOP), next_batch, ("train.py", "main"))]
    p = verdict([], main=main_fetch, data_cpu=0.9)
    assert p.bound == "data-input/cpu-transform"
    assert p.cause.text.startswith(
        "the training thread makes each batch itself (num_workers=0) (60 ms a step), computing "
        "through 90% of it: 100% in Sentences.__getitem__"
    ), p.cause.text
    assert any(x.startswith(TEXT_LEVER) for x in p.levers)
    # the thread's whole wait is tokenising: storing the ids takes it all
    text = p.lever_savings[next(i for i, x in enumerate(p.levers) if x.startswith(TEXT_LEVER))]
    assert text is not None and abs(text.share - 60 / 75) < 0.02, text


def test_workers_for_a_thread_that_makes_its_batches_are_sized_by_the_free_cpus():
    """60 ms of a 75-ms step made on the training thread, two CPUs: one worker makes a batch
    in 60 ms, longer than the 15 ms left of the step, so the step becomes 60 ms (15 saved);
    the CPUs the job leaves free bound the least."""
    p = verdict([], main=None, data_cpu=0.9)
    assert p.levers[0] == "DataLoader num_workers=0 on a 2-CPU machine: try 1", p.levers
    got = p.saving
    assert got is not None and abs(got.share - 15 / 75) < 0.02, got
    assert got.condition == "if 1 worker made a batch in the time the training thread takes now"
    assert got.low <= got.share


def test_no_workers_and_a_thread_asleep_in_its_wait_reads():
    p = verdict([], data_cpu=0.05)
    assert "asleep through 95% of it (reading, not computing)" in p.cause.text


def test_nothing_measured_of_the_loader_is_no_cause():
    steps = tuple(step(i, int(i * 75e6), {"data_wait": 60.0, "forward": 8.0}) for i in range(30))
    sig = reduce_windows([], [], agents=AgentsSample(100, 1.0, 0.0, (agent(100, steps),)))
    v, _ = evaluate(sig, now=10.0)
    assert v.principal is not None and v.principal.bound == "data-input"
    assert v.principal.cause is None


def test_the_agents_samples_in_a_torch_op_say_nothing_of_the_fetch_before_it():
    """The agent samples where the GIL is let go: a tokenising __getitem__ reads as the torch
    collate after it. Those samples are left out, never named a kind."""
    collate = (("torch/utils/data/_utils/collate.py", "collate_tensor_fn"),
               ("torch/utils/data/_utils/fetch.py", "_MapDatasetFetcher.fetch"),
               ("torch/utils/data/dataloader.py", "_BaseDataLoaderIter.__next__"),
               ("train.py", "main"))  # fmt: skip
    p = verdict([], main=[collate], data_cpu=0.9, via="agent")
    assert p.cause.text.endswith("computing through 90% of it"), p.cause.text
    assert not any("collat" in x for x in p.levers), p.levers
    py_spy = verdict([], main=[collate], data_cpu=0.9)  # py-spy's samples are not biased
    assert "collating samples into a batch" in py_spy.cause.text


def test_a_library_kind_beside_the_jobs_own_python_is_named_with_its_levers():
    """Four samples in the job's own lines (C calls no frame names), one in re: text is a
    fifth of the work at least, so its levers come, and the line says both."""
    p = verdict([OWN, OWN, OWN, OWN, TEXT])
    assert (
        "80% in Rows.parse (data.py:10): the job's own Python; text normalising and "
        "tokenising 20%" in p.cause.text
    )
    assert any(x.startswith(TEXT_LEVER) for x in p.levers), p.levers
