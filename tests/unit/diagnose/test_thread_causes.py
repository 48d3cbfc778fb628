"""What a hung thread waits for, told by the other threads of its process and by the kernel
(``diagnose/causes/threads.py``, ``pipes.py``): a producer gone, a lock nobody releases, a
lock-order deadlock, a socket whose answering thread is parked, a pipe whose writer died."""

from __future__ import annotations

from builders import host_at
from builders import proc as a_proc

from gputop.diagnose import reduce_windows
from gputop.diagnose.causes.hung import hung_cause
from gputop.diagnose.causes.pipes import CLOSE_WRITE_END, QUEUE_DEADLINE
from gputop.diagnose.causes.sockets import SOCKET_TIMEOUT
from gputop.diagnose.causes.threads import ORDER, RELEASE, SENTINEL
from gputop.model import Window
from gputop.model.host import ProcSample
from gputop.model.stack_stats import stillness
from gputop.model.stacks import Frame, ProcessStacks, SocketPeer, StacksSample, ThreadStack
from gputop.sources.stack_phases import classify

MAIN = (Frame("main", "train.py", 47), Frame("<module>", "train.py", 60))
QUEUE_GET = (Frame("Condition.wait", "threading.py", 327), Frame("Queue.get", "queue.py", 171),
             *MAIN)  # fmt: skip
EVENT_WAIT = (Frame("Condition.wait", "threading.py", 327), Frame("Event.wait", "threading.py",
              629), Frame("label_server", "train.py", 20))  # fmt: skip
READ = (Frame("read_exact", "train.py", 31), *MAIN)
MP_READ = (Frame("Connection._recv", "multiprocessing/connection.py", 395),
           Frame("Queue.get", "multiprocessing/queues.py", 103), *MAIN)  # fmt: skip


def thread(name: str, frames: tuple[Frame, ...], waits: str = "", writers=None, tid: int = 1,
           active: bool = False, peer: SocketPeer | None = None) -> ThreadStack:  # fmt: skip
    phase, deciding = classify(frames, active)
    return ThreadStack(tid, name, active, frames, phase, deciding, waits, writers, peer)


def stacks(*threads: ThreadStack, n: int = 14) -> Window:
    """pid 100's threads, the same for n seconds."""
    samples = tuple(
        StacksSample(100, float(i), 0.0, (ProcessStacks(100, "main", threads, taken=float(i)),))
        for i in range(n)
    )
    return Window(samples, 0.0, float(n))


def host(extra: tuple[ProcSample, ...] = ()) -> Window:
    procs = (proc(100, 1, "main", "python train.py", 0.0), *extra)
    return Window(tuple(host_at(t, procs) for t in range(0, 14, 2)), 0.0, 14.0)


def proc(pid: int, ppid: int, role: str, cmd: str, cpu: float) -> ProcSample:
    return a_proc(pid, role, name="python", ppid=ppid, cmdline=cmd, state="S", cpu_cores=cpu,
                  num_threads=1, threads_running=0)  # fmt: skip


def cause(*threads: ThreadStack, extra: tuple[ProcSample, ...] = ()):
    return hung_cause(reduce_windows([], [], host=host(extra), stacks=stacks(*threads)))


def test_a_queue_with_no_thread_left_to_feed_it():
    c = cause(thread("MainThread", QUEUE_GET, "futex"),
              thread("gputop-agent", EVENT_WAIT, "futex", tid=2))  # fmt: skip
    assert c is not None and c.levers[0] == SENTINEL
    assert c.text.startswith("pid 100 waits in Queue.get at train.py:47 and no other thread")


def test_a_lock_whose_taker_has_ended():
    c = cause(thread("MainThread", MAIN, "futex"))
    assert c is not None and c.levers[0] == RELEASE
    assert "waits at train.py:47 on a lock (futex) that no thread of its process" in c.text


def test_two_threads_each_on_a_lock_are_a_lock_order_deadlock():
    metrics = (Frame("metrics_thread", "train.py", 25), Frame("Thread.run", "threading.py", 982))
    c = cause(thread("MainThread", MAIN, "futex"), thread("metrics", metrics, "futex", tid=2))
    assert c is not None and c.levers[0] == ORDER
    assert c.text.startswith("a lock-order deadlock in pid 100") and "metrics" in c.text


def test_a_socket_whose_answering_thread_is_parked():
    c = cause(thread("MainThread", MAIN, "recvfrom socket:[9]"),
              thread("label_server", EVENT_WAIT, "futex", tid=2))  # fmt: skip
    assert c is not None
    assert "on recvfrom socket:[9], and the threads that could end it are parked too" in c.text
    assert "label_server in Event.wait at train.py:20" in c.text


def test_a_socket_with_no_other_thread_is_not_told_by_threads():
    assert cause(thread("MainThread", MAIN, "recvfrom socket:[9]")) is None


def test_another_thread_at_work_says_nothing():
    busy = (Frame("crunch", "train.py", 90),)
    c = cause(thread("MainThread", QUEUE_GET, "futex"),
              thread("worker", busy, tid=2, active=True))  # fmt: skip
    assert c is None


def test_a_pipe_whose_writer_died_while_the_reader_keeps_a_write_end():
    c = cause(thread("MainThread", READ, "read pipe:[77]", writers=(100,)))
    assert c is not None and c.levers[0] == CLOSE_WRITE_END
    assert c.text == (
        "pid 100 waits to read pipe:[77] and no other process holds its write end: the writer "
        "has exited, and the reader keeps a write end itself, so the read never ends"
    )


def test_a_multiprocessing_queue_reader_is_told_to_check_its_producer():
    c = cause(thread("MainThread", MP_READ, "read pipe:[77]", writers=(100,)))
    assert c is not None and c.levers == (QUEUE_DEADLINE,)


def test_a_pipe_with_a_live_writer_names_it():
    writer = proc(300, 100, "child", "python prep.py", 0.0)
    c = cause(thread("MainThread", READ, "read pipe:[77]", writers=(100, 300)), extra=(writer,))
    assert c is not None
    assert c.text == (
        "pid 100 waits to read pipe:[77] from pid 300 (python prep.py), using 0% of a core: it "
        "writes nothing"
    )


def test_a_process_that_exited_is_not_still():
    t = thread("MainThread", MAIN, "futex")
    gone = ProcessStacks(200, "child", (t,), taken=0.0)
    samples = [StacksSample(100, float(i), 0.0, (ProcessStacks(100, "main", (t,), taken=float(i)),
               *((gone,) if i < 3 else ()))) for i in range(6)]  # fmt: skip
    assert [m.pid for m in stillness(samples)] == [100]


def test_a_tcp_peer_of_the_job_that_answers_nothing_is_named():
    service = proc(300, 100, "child", "python label_service.py", 0.0)
    peer = SocketPeer("127.0.0.1:5000", 300, True)
    c = cause(thread("MainThread", MAIN, "recvfrom socket:[9]", peer=peer), extra=(service,))
    assert c is not None and c.levers[-1] == SOCKET_TIMEOUT
    assert c.text == (
        "pid 100 waits for an answer from pid 300 (python label_service.py) over TCP "
        "(127.0.0.1:5000), using 0% of a core: it sends nothing"
    )


def test_a_tcp_peer_elsewhere_is_named_by_its_address():
    here = SocketPeer("127.0.0.1:6379", None, True)
    c = cause(thread("MainThread", MAIN, "recvfrom socket:[9]", peer=here))
    assert c is not None and "from 127.0.0.1:6379, a process on this host outside the job" in c.text
    assert c.levers[0].startswith("ss -tp '( sport = :6379 )'")
    far = SocketPeer("10.0.0.7:29500", None, False)
    c = cause(thread("MainThread", MAIN, "recvfrom socket:[9]", peer=far))
    assert c is not None and c.text.endswith("from 10.0.0.7:29500 (another host): nothing comes")


def test_a_unix_socket_peer_is_named_by_its_process_or_its_path():
    service = proc(300, 100, "child", "python embed_server.py", 0.0)
    peer = SocketPeer("/run/embed.sock", 300, True, "Unix")
    c = cause(thread("MainThread", MAIN, "recvfrom socket:[9]", peer=peer), extra=(service,))
    assert c is not None and c.text == (
        "pid 100 waits for an answer from pid 300 (python embed_server.py) over a Unix socket "
        "(/run/embed.sock), using 0% of a core: it sends nothing"
    )
    outside = SocketPeer("@embed", None, True, "Unix")
    c = cause(thread("MainThread", MAIN, "recvfrom socket:[9]", peer=outside))
    assert c is not None and "over a Unix socket (@embed) from a process outside the job" in c.text
    assert c.levers[0].startswith("ss -xp names the process at the other end of @embed")


def test_a_socket_whose_other_end_its_own_process_holds_is_told_by_its_threads():
    """A socketpair between two threads: which thread should answer, not the process."""
    own = SocketPeer("socket:[10]", 100, True, "Unix")
    c = cause(thread("MainThread", MAIN, "recvfrom socket:[9]", peer=own),
              thread("label_server", EVENT_WAIT, "futex", tid=2))  # fmt: skip
    assert c is not None and "the threads that could end it are parked too" in c.text
