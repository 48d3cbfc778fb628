"""The agent sends the source line of a thread's innermost frame in the job's own code (the C
call it is in), never a library's; the monitor takes it bounded, as one printable line."""

from __future__ import annotations

import json
import threading
import time

from tests_support import until

from gputop.agent.stacks import StackSampler, _library_dirs, own_line
from gputop.sources import agent_decode as dec


def test_the_line_of_a_c_call_in_the_jobs_code_is_sent_and_read_back():
    stop, entered = threading.Event(), threading.Event()

    def in_a_c_call():
        entered.set()  # it keeps the GIL from here until its sleep lets it go
        while not stop.is_set():
            time.sleep(0.05)  # pacing: the line the monitor should read

    t = threading.Thread(target=in_a_c_call, name="caller")
    t.start()
    try:
        until(entered.is_set, timeout=10, what="the thread to start")
        sample = StackSampler().sample()
    finally:
        stop.set()
        t.join()
    (caller,) = [x for x in sample if x["name"] == "caller"]
    assert caller["frames"][0][3] == "time.sleep(0.05)  # pacing: the line the monitor should read"
    assert all(len(f) == 3 for f in caller["frames"][1:])  # the innermost frame only
    msg = json.loads(json.dumps({"threads": sample}))
    (back,) = [x for x in dec.parse_stacks(msg) if x[1] == "caller"]
    assert back[3][0][3].startswith("time.sleep(0.05)")


def test_a_librarys_line_is_not_read_and_a_crafted_one_is_cut():
    assert own_line(threading.__file__, 10, _library_dirs()) == ""  # Python's own library
    assert own_line("/x/site-packages/torch/nn/functional.py", 3, ()) == ""
    msg = {"threads": [{"tid": 1, "name": "t", "frames": [["f", "a.py", 1, "\x1b" + "x" * 999],
                                                          ["g", "b.py", 2]]}]}  # fmt: skip
    ((_, _, _, frames),) = dec.parse_stacks(msg)
    assert frames[0][3].startswith("?x") and len(frames[0][3]) == dec.MAX_CODE
