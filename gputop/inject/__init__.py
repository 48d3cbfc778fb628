"""Loading gputop's agent into a Python process that is already running, and into the ranks
below it, with no restart and nothing changed on disk (issue 14, item 3).

    plan = plan_load(pid, roles)   # reads only: what will be done, what it needs, refusals
    print("\\n".join(plan.lines()))
    report = load_agent(plan)      # does it, then waits (bounded) for the agents' sockets
    print(report.line())

Python 3.14 and newer: ``sys.remote_exec`` (``remote.py``). Older: a debugger queues a pending
call that the main thread runs at its next safe point (``debugger.py``). The injected code
imports ``gputop.agent`` and calls its ``init()``; nothing else.
"""

from gputop.inject.plan import LoadPlan, LoadReport, ProcessLoad, load_agent, plan_load

__all__ = ["LoadPlan", "LoadReport", "ProcessLoad", "load_agent", "plan_load"]
