"""Automatic phases (gputop/agent/auto.py) in this process, with CPU torch: the outermost module
call only, the user's markers first, nothing while torch.compile traces or a CUDA graph is
captured, and nothing ever raised into the training code."""

from __future__ import annotations

import os
import time

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

import gputop.agent as gt  # noqa: E402
from gputop.agent import auto  # noqa: E402
from gputop.agent.recorder import StepRecorder  # noqa: E402

REC = gt._rec


@pytest.fixture(autouse=True)
def agent(monkeypatch):
    if not REC.on:
        pytest.skip("GPUTOP_DISABLE is set")
    monkeypatch.setenv("GPUTOP_NO_SERVER", "1")
    gt.init(server=False)  # installs on this (the main) thread: every hook at once
    REC.step()  # start from a clean step
    yield
    if auto._FORWARD:  # no eval pass left open for the next test
        auto._FORWARD[0].eval_pass.mode(True)
        auto._FORWARD[0].eval_pass.off = False
    REC.step()


def phases() -> dict[str, int]:
    """The current step's phases so far (closes nothing)."""
    return {n: REC.acc[i] for i, n in enumerate(REC.names) if REC.acc[i]}


def last_step() -> dict[str, int]:
    REC.step()
    rec = REC.records[-1]
    return {REC.names[i]: d for i, d in enumerate(rec[4]) if d}


class Inner(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


class Root(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = net()

    def forward(self, x):
        return self.body(x)


def net() -> nn.Module:
    return nn.Sequential(Inner(), Inner(), nn.Linear(4, 2))


def test_only_the_outermost_module_call_is_forward():
    m, x = net(), torch.randn(3, 4)
    seen = []
    hook = torch.nn.modules.module.register_module_forward_pre_hook(
        lambda mod, args: seen.append(auto._FORWARD[0].depth)
    )
    try:
        m(x)
    finally:
        hook.remove()
    assert len(seen) == 8 and max(seen) >= 2  # eight module calls, nested three deep
    assert auto._FORWARD[0].depth == 0 and REC.open_id == -1
    got = last_step()
    assert set(got) == {"forward"}
    assert REC.auto["forward"].depth == 0


def test_forward_backward_and_the_optimizer_without_a_marker_add_up_to_at_most_the_step():
    m = net()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    REC.auto_step, REC.explicit_steps = True, False
    loss = m(torch.randn(3, 4)).sum()
    loss.backward()
    opt.step()  # the optimizer post hook is the step boundary
    _seq, _, t0, t1, durations, *_ = REC.records[-1]
    got = {REC.names[i]: d for i, d in enumerate(durations) if d}
    assert {"forward", "backward", "optimizer"} <= set(got)
    assert sum(durations) <= t1 - t0


def test_no_grad_inference_mode_and_eval_mode_are_eval():
    m, x = net(), torch.randn(3, 4)
    with torch.no_grad():
        m(x)
    with torch.inference_mode():
        m(x)
    m.eval()
    m(x)
    assert set(last_step()) == {"eval"}


def test_a_batch_fetched_with_gradients_off_is_the_eval_passes_wait():
    # a validation loop's loader wait is the eval's cost, not training's batch wait
    # (Lightning's and transformers' validation loops run under no_grad/inference_mode)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(64, 4)),
                                         batch_size=8)  # fmt: skip
    for _ in loader:
        pass
    assert set(last_step()) == {"data_wait"}
    with torch.inference_mode():
        for _ in loader:
            pass
    with torch.no_grad():
        for _ in loader:
            pass
    assert set(last_step()) == {"eval"}


def test_the_users_markers_win_and_nothing_counts_twice():
    m, x = net(), torch.randn(3, 4)
    with gt.FORWARD:
        loss = m(x).sum()
    with gt.phase("my_backward"):
        loss.backward()
    with gt.OPTIMIZER:  # the optimizer's own hook must not re-enter the user's marker
        torch.optim.SGD(m.parameters(), lr=0.1).step()
    got = last_step()
    assert set(got) <= {"forward", "my_backward", "optimizer"}, got
    assert REC.open_id == -1 and REC.user_open == 0


def test_an_automatic_phase_inside_an_automatic_one_pauses_it():
    r = StepRecorder()
    fwd, save = r.auto["forward"], r.auto["checkpoint"]
    assert fwd.open() == 1
    assert save.open() == 1 and r.open_phase[0] == "checkpoint"
    assert fwd.open() == 2  # re-entrant: counted, not reopened
    fwd.close()
    save.close()
    fwd.close()
    t0 = r.step_t0
    r.step()
    *_, start, end, durations = r.records[-1][:5]
    assert start == t0 and sum(durations) <= end - start
    assert r.open_id == -1 and fwd.depth == 0


def test_nothing_while_torch_compile_traces_or_a_cuda_graph_is_captured(monkeypatch):
    m, x = net(), torch.randn(3, 4)
    monkeypatch.setattr(auto._Guard, "compiling", staticmethod(lambda: True))
    m(x).sum().backward()
    torch.save({}, os.devnull)
    assert phases() == {}
    monkeypatch.undo()

    class Capturing:
        @staticmethod
        def is_current_stream_capturing():
            return True

    monkeypatch.setattr(auto._Guard, "cuda", Capturing)
    monkeypatch.setattr(REC, "cuda_events", lambda: None)  # as if CUDA were in use
    m(x).sum().backward()
    assert phases() == {}


def test_a_hook_that_fails_never_reaches_the_training_code(monkeypatch):
    m, x = net(), torch.randn(3, 4)

    def broken(self):
        raise RuntimeError("a bug in gputop")

    errors = REC.errors
    monkeypatch.setattr(type(REC.auto["forward"]), "open", broken)
    loss = m(x).sum()
    loss.backward()
    torch.save({}, os.devnull)
    assert REC.errors > errors
    monkeypatch.undo()
    assert torch.isfinite(loss)


def test_the_users_exception_passes_through_and_leaves_no_phase_open():
    class Boom(nn.Module):
        def forward(self, x):
            raise ValueError("mine")

    m = nn.Sequential(nn.Linear(4, 4), Boom())
    with pytest.raises(ValueError, match="mine"):
        m(torch.randn(2, 4))
    assert auto._FORWARD[0].depth == 0 and REC.open_id == -1
    with pytest.raises(RuntimeError):
        torch.autograd.backward(torch.ones(2))  # does not require grad: torch's own error
    assert REC.auto["backward"].depth == 0 and REC.open_id == -1


def test_wrapped_functions_keep_what_they_wrap():
    assert torch.autograd.backward.__wrapped__.__module__ == "torch.autograd"
    assert torch.save.__wrapped__.__name__ == "save"


def test_a_compiled_model_is_one_forward_and_compiles_without_breaks():
    dynamo = pytest.importorskip("torch._dynamo")
    m, x = net(), torch.randn(3, 4)
    compiled = torch.compile(m, backend="eager", fullgraph=True)  # a graph break would raise
    gt.init(server=False)  # the agent thread's next tick would do it: OptimizedModule timed
    for _ in range(3):
        compiled(x).sum().backward()
        got = last_step()
    assert {"forward", "backward"} <= set(got)
    assert auto._FORWARD[0].depth == 0
    dynamo.reset()


def test_once_the_roots_are_found_the_global_hooks_come_off_and_forward_is_still_timed(
    monkeypatch,
):
    import io
    import pickle

    from torch.nn.modules import module as modules

    monkeypatch.setattr(auto, "_compiled_now", lambda: False)  # an earlier test compiled
    m, x = Root(), torch.randn(3, 4)
    st = auto._FORWARD[0]
    st.arm()  # a discovery round, as at installation
    for _ in range(auto.DISCOVER_STEPS + 1):
        m(x)
        REC.step()
    assert not st.handles and st.pre not in modules._global_forward_pre_hooks.values()
    assert Root.forward.__gputop__ and Root.forward.__wrapped__ is not None
    m(x)
    assert set(last_step()) == {"forward"}
    buf = io.BytesIO()
    torch.save(m, buf)  # the whole module pickles: nothing of gputop's is on the instance
    assert b"gputop" not in buf.getvalue()
    assert pickle.loads(pickle.dumps(m.body)) is not None


class _Items(torch.utils.data.Dataset):
    """Items that cost ``ms`` each, computed (``busy``) or slept through (a read)."""

    def __init__(self, ms: float, busy: bool) -> None:
        self.ms, self.busy = ms, busy

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int):
        if self.busy:
            end = time.thread_time() + self.ms / 1000
            while time.thread_time() < end:
                pass
        else:
            time.sleep(self.ms / 1000)  # pacing: an item read, slept through
        return torch.zeros(2)


def test_the_batch_waits_carry_the_cpu_the_training_thread_spent_in_them():
    """num_workers=0: a fetch that computes uses the thread's CPU for its whole wait, one that
    sleeps on reads next to none (what tells the main thread's transform from a slow read)."""
    for busy in (True, False):
        for _ in torch.utils.data.DataLoader(_Items(3, busy), batch_size=4):
            pass
        REC.step()
        *_, data_cpu, _gc, _full = REC.records[-1]
        wait = REC.records[-1][4][REC.names.index("data_wait")]
        assert wait >= 24_000_000  # 8 items of 3 ms
        assert (data_cpu >= 0.9 * 24_000_000) if busy else (data_cpu < 0.2 * wait), (busy, data_cpu)


class Student(Root):
    """A model of its own class (so a test wraps its class alone)."""


def trained(monkeypatch) -> tuple[nn.Module, torch.Tensor]:
    """A Student trained past the discovery of the roots: its class's forward and train are
    wrapped, and it is the model that trains."""
    monkeypatch.setattr(auto, "_compiled_now", lambda: False)
    m, x = Student(), torch.randn(3, 4)
    st = auto._FORWARD[0]
    st.arm()
    for _ in range(auto.DISCOVER_STEPS + 1):
        m(x).sum().backward()
        REC.step()
    assert Student.train.__gputop__
    m(x).sum().backward()
    REC.step()
    return m, x


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_from_eval_to_train_everything_is_the_evaluation(monkeypatch):
    # the metrics in Python between the eval's forwards, and its loader's waits with gradients
    # on, are the evaluation's: the pass is timed by its clock, not by stack samples
    m, _ = trained(monkeypatch)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(16, 4)),
                                         batch_size=8)  # fmt: skip
    m.eval()
    for (batch,) in loader:
        m(batch)
        spin(0.02)  # the metrics, in the loop's own Python
    m.train()
    spin(0.01)  # back in the training loop: its own time again
    got = last_step()
    assert set(got) == {"eval"}, got
    assert got["eval"] >= 40_000_000  # both stretches of metrics
    # a teacher of the same class put in eval mode is no evaluation
    teacher = Student()
    teacher.eval()
    spin(0.01)
    assert "eval" not in last_step()


def test_training_in_eval_mode_ends_the_pass_at_the_first_backward(monkeypatch):
    m, x = trained(monkeypatch)
    m.eval()  # to freeze dropout and batch norm, then it trains
    m(x).sum().backward()
    got = last_step()
    assert "backward" in got
    m.eval()
    spin(0.01)
    assert "eval" not in last_step()  # the mode is no clock for this process any more


def test_logging_printing_and_saving_through_a_library_are_timed_where_they_are_called(
    tmp_path, capsys
):
    import logging

    class Slow(logging.Handler):
        def emit(self, record):
            time.sleep(0.02)  # pacing: a log service that answers slowly

    log = logging.getLogger("gputop-test-side")
    log.addHandler(Slow())
    log.propagate = False
    log.setLevel(logging.INFO)
    log.info("step %d", 1)
    log.debug("not emitted: costs nothing")
    print("loss 0.1")
    got = last_step()
    assert set(got) == {"log"} and got["log"] >= 20_000_000, got
    safetensors = pytest.importorskip("safetensors.torch")
    gt.init(server=False)  # the agent's next pass wraps what was imported since
    safetensors.save_file({"w": torch.zeros(4)}, str(tmp_path / "w.safetensors"))
    assert set(last_step()) == {"checkpoint"}


def test_gradient_work_outside_the_optimizer_step_and_a_functional_loss_are_compute():
    m, x = net(), torch.randn(3, 4)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    REC.auto_step = False  # the optimizer's hooks take no step boundary here
    try:
        out = m(x)
        REC.step()
        loss = torch.nn.functional.cross_entropy(out.detach(), torch.tensor([0, 1, 0]))
        assert set(last_step()) == {"forward"}
        loss = m(x).sum()
        loss.backward()
        REC.step()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.zero_grad()
        assert set(last_step()) == {"optimizer"}
        with torch.no_grad():
            torch.nn.functional.mse_loss(out, out)
        assert set(last_step()) == {"eval"}
    finally:
        REC.auto_step = True


def test_the_side_calls_keep_what_they_wrap():
    import builtins
    import logging

    for fn in (builtins.print, logging.Logger.handle, torch.nn.functional.cross_entropy,
               torch.nn.utils.clip_grad_norm_, torch.optim.Optimizer.zero_grad):  # fmt: skip
        assert fn.__gputop__ and fn.__wrapped__ is not None, fn
    assert torch.nn.functional.cross_entropy.__name__ == "cross_entropy"
