"""The target a command watches: the sources of an attached process tree (its processes, its
agents, its stacks), and loading gputop's agent into it headless (--attach).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where they are used: the command decides what it loads
    from gputop.sources.agent_link import AgentLink
    from gputop.sources.host import HostSource
    from gputop.sources.stacks import StackSource
    from gputop.sources.target import TargetId


@dataclass(frozen=True)
class Attached:
    """The sources of an attached process tree: its processes, its agents and its stacks."""

    host: HostSource | None = None
    agents: AgentLink | None = None
    stacks: StackSource | None = None
    identity: TargetId | None = None
    """The target's ``TargetId``: what the keys ask before acting on its PID."""

    @property
    def pid(self) -> int | None:
        return self.host.pid if self.host is not None else None

    def command(self) -> str | None:
        """The target's command line, as its header and recordings name it."""
        main = self.host.sample().main if self.host is not None else None
        return (main.cmdline or main.name) if main else None


def attach(
    pid: int | None,
    stacks_budget: float | None = None,
    exit_code: Callable[[], int | None] | None = None,
    gone_ok: bool = False,
    clock: Callable[[], float] | None = None,
) -> Attached:
    """The sources of ``pid``'s tree (nothing for None), each given what it reads at
    construction, in the order they depend on each other: the target's identity, one walk of
    its tree, the agent link (which processes serve an agent), the stack sampler (its roles
    helped by the agents'), the host source (its roles settled by all the evidence).

    All follow the one identity: once the target has exited, a later process given its PID is
    neither sampled nor searched for agents. TargetNotFound propagates (one line), unless
    ``gone_ok`` (``gputop run``'s job, which may have exited before it could be read: its
    agents' last words are still read, with no host source). ``stacks_budget``: py-spy's CPU
    as a share of one core (default ``DEFAULT_SHARE``); ``exit_code``: the job's, when
    gputop started it; ``clock``: the tree's and the host source's (tests hold it still)."""
    if pid is None:
        return Attached()
    from gputop.model.roles import merge_hints
    from gputop.sources.agent_link import AgentLink
    from gputop.sources.host import HostSource
    from gputop.sources.proc_tree import ProcTree
    from gputop.sources.stack_budget import DEFAULT_SHARE, StackBudget
    from gputop.sources.stacks import StackSource
    from gputop.sources.target import TargetId, TargetNotFound

    try:
        identity: TargetId | None = TargetId.of(pid)
    except TargetNotFound:
        if not gone_ok:
            raise
        identity = None
    clock = clock or time.monotonic
    tree = ProcTree(pid, clock=clock, identity=identity)
    link = AgentLink(pid, pids=tree.agent_pids)
    budget = StackBudget(stacks_budget if stacks_budget is not None else DEFAULT_SHARE)
    stacks = StackSource(pid, hints=link.hints, identity=identity, tree=tree,
                         agent_stacks=link.stacks, budget=budget)  # fmt: skip
    host = None
    if identity is not None:
        host = HostSource.open(
            pid,
            identity=identity,
            tree=tree,
            hints=lambda: merge_hints(stacks.hints(), link.hints()),
            exit_code=exit_code,
            clock=clock,
        )
    return Attached(host, link, stacks, identity)


def roles_of(attached: Attached) -> dict[int, str] | None:
    """pid -> role (main, worker, ...) from the host source: DataLoader workers get no agent."""
    if attached.host is None:
        return None
    try:
        return {p.pid: p.role for p in attached.host.sample().processes}
    except Exception:
        return None


def offer_agent(
    attached: Attached, load: bool, say: Callable[[str], None] | None = None
) -> str | None:
    """Headless: with ``load`` (--attach), the plan's lines, then the load and its result; without,
    one line saying the agent is not loaded and how to load it (nothing when it is loaded).
    Returns the line for the diagnosis' problems when the verdict goes without the agent
    (None: every process has it), so that nothing is downgraded silently."""
    if attached.pid is None:
        return None
    from gputop.inject import load_agent, plan_load
    from gputop.sources.agent_link import WITHOUT_AGENT

    say = say or (lambda line: print(f"gputop: {line}", file=sys.stderr))
    if attached.identity is not None and not attached.identity.alive():
        if load:
            say(f"the agent was not loaded: {attached.identity.gone()}")
        return None
    plan = plan_load(attached.pid, roles_of(attached))
    if plan.nothing_to_do:
        if load:
            say(plan.summary())  # asked for: say why nothing is done
        return None
    if not load:
        if not plan.todo and plan.refusals:  # --attach would fail: say why instead
            line = (f"pid {attached.pid} has no gputop agent, and it cannot be loaded: "
                    f"{plan.refusals[0]}: {WITHOUT_AGENT}")  # fmt: skip
        else:
            line = (f"pid {attached.pid} has no gputop agent: {WITHOUT_AGENT}; add --attach to "
                    "load it without a restart")  # fmt: skip
        say(line)
        return line
    for line in plan.lines():
        say(line)
    if not plan.todo:
        return f"the agent was not loaded: {plan.summary()}: {WITHOUT_AGENT}"
    report = load_agent(plan, progress=say)
    say(report.line())
    if report.ok:
        return None
    line = report.line()
    return line if WITHOUT_AGENT in line else f"{line}: {WITHOUT_AGENT}"
