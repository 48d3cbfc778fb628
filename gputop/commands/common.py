"""What several subcommands share: flag groups, opening the GPU source (real NVML, a
simulated board, or none) in one place with one error path, attaching to a target, the
session's outputs, and starting the screen.

Nothing here imports Textual at module level: the colour system must be chosen (environment
variables) before Textual is imported, and headless commands never import it at all.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from gputop.errors import BadUsage, CannotDo

if TYPE_CHECKING:  # imported where they are used: the command decides what it loads
    from gputop.config import Config
    from gputop.record.writer import Recorder
    from gputop.run import Job
    from gputop.session import Session
    from gputop.sim.scenarios import PhaseFollower, Scenario
    from gputop.sinks import Sink, Sinks
    from gputop.sources.agent_link import AgentLink
    from gputop.sources.feeds import NoGpus
    from gputop.sources.gpu_choice import GpuChoice
    from gputop.sources.host import HostSource
    from gputop.sources.nvml import NvmlSource
    from gputop.sources.stacks import StackSource
    from gputop.sources.target import TargetId
    from gputop.sources.watchdog import Watchdog


class UsageError(BadUsage):
    """Flags that contradict each other, or a value only the command can check (a theme): said
    with the command's usage, as argparse says its own errors."""

    when = "flags that contradict each other, or a value only the command can check"


# ---- flag groups ----

BUNDLED_THEMES = ("gputop-dark", "gputop-light", "gputop-ansi", "gputop-mono")
"""The themes in themes/ (a test holds this to the folder): listed in --help without reading it."""


def interval_seconds(text: str) -> float:
    """--interval: seconds within the range the screen keeps (argparse says the range and exits
    2 otherwise, before anything opens)."""
    from gputop.config import INTERVAL_MAX, INTERVAL_MIN

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not INTERVAL_MIN <= value <= INTERVAL_MAX:
        raise argparse.ArgumentTypeError(
            f"{text} s is outside {INTERVAL_MIN:g}..{INTERVAL_MAX:g} seconds"
        )
    return value


def add_sim_flags(p: argparse.ArgumentParser) -> None:
    """--sim-board and its companions: a simulated board below pynvml instead of the driver."""
    from gputop.sim import BOARDS, DRIVERS, SCENARIOS

    boards = ", ".join(sorted(BOARDS))
    p.add_argument(
        "--sim-board",
        metavar="NAME",
        default=None,
        help=f"read a simulated board instead of the real driver: {boards}; "
        "a count (h100x8) and -mig (a100-mig) may follow",
    )
    p.add_argument(
        "--sim-driver",
        metavar="GEN",
        default=None,
        help=f"driver generation of the simulated board: {', '.join(DRIVERS)} (default: the "
        "driver of the board's real capture)",
    )
    p.add_argument(
        "--sim-scenario",
        metavar="NAME",
        default="idle",
        help=f"workload on the simulated board: {', '.join(SCENARIOS)} (default: idle)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the simulated board's noise")


def add_gpu_flags(p: argparse.ArgumentParser) -> None:
    """--only and --only-visible: the GPUs shown and judged (``sources/gpu_choice.py``)."""
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "--only",
        type=_only,
        default=argparse.SUPPRESS,  # given before a subcommand (gputop --only 0 diagnose) or after
        metavar="GPUS",
        help="only these GPUs: indices as nvidia-smi numbers them, or UUIDs (or their start), "
        "comma-separated: --only 0,3",
    )
    group.add_argument(
        "--only-visible",
        action="store_true",
        default=argparse.SUPPRESS,
        help="only the GPUs in this shell's CUDA_VISIBLE_DEVICES (indices name the same GPUs "
        "as nvidia-smi's when CUDA_DEVICE_ORDER=PCI_BUS_ID; UUIDs always do)",
    )


def _only(text: str) -> GpuChoice:
    from gputop.sources.gpu_choice import parse_only

    try:
        return parse_only(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--only ")) from None


def gpu_choice(args: argparse.Namespace) -> GpuChoice | None:
    """What --only or --only-visible chose (None: every GPU); a note on stderr when
    CUDA_VISIBLE_DEVICES's indices may not be nvidia-smi's."""
    from gputop.sources.gpu_choice import order_note, visible_devices

    if getattr(args, "only", None) is not None:
        return args.only
    if not getattr(args, "only_visible", False):
        return None
    choice = visible_devices(os.environ)
    note = order_note(choice, os.environ)
    if note:
        print(f"gputop: {note}", file=sys.stderr)
    return choice


def add_ui_flags(
    p: argparse.ArgumentParser, under_command: bool = False, live: bool = True
) -> None:
    """The monitor's flags; on a subcommand they default to "not given" so that
    ``gputop --interval 3 demo`` and ``gputop demo --interval 3`` mean the same. Live modes
    also take a target and the outputs (``live``; replay does not)."""
    from gputop.config import COLOR_MODES

    if under_command:
        p.argument_default = argparse.SUPPRESS

    p.add_argument(
        "--interval",
        type=interval_seconds,
        metavar="S",
        help="seconds between screen updates, 0.5..10 (default 2; 5 with --low-bandwidth)",
    )
    p.add_argument(
        "--color",
        choices=COLOR_MODES,
        help="colours to use (default auto: from COLORTERM and TERM, and mono when NO_COLOR is "
        "set); mono is black and white",
    )
    p.add_argument(
        "--theme",
        metavar="NAME",
        help=f"theme: {', '.join(BUNDLED_THEMES)} or one in the themes folder (default "
        "gputop-dark)",
    )
    p.add_argument(
        "--no-mouse",
        dest="mouse",
        action="store_const",
        const=False,
        help="do not capture the mouse (every action has a key)",
    )
    p.add_argument(
        "--low-bandwidth",
        action="store_const",
        const=True,
        help="for slow ssh links: 16 colours, no animation, no mouse, 5 s refresh, narrow charts",
    )
    p.add_argument("--config", type=Path, metavar="FILE", help="config file to read")
    if not live:
        return
    add_output_flags(p)
    p.add_argument(
        "-p",
        "--pid",
        type=int,
        metavar="PID",
        help="the training process to attach to (its DataLoader workers and children too)",
    )


def json_help(schema: str, verb: str = "JSON") -> str:
    """The --json flag's help: where an installed gputop shows the output's schema and fields."""
    return f"{verb} (its schema: `gputop schema {schema}`; its fields: `gputop docs {schema}`)"


ATTACH_HELP = (
    "with --pid: load gputop's agent into the process and the ranks below it if they have none "
    "(steps and phases; no restart, nothing installed in the job's environment: a private "
    "copy of the agent goes into its own /tmp, a container's too, and is removed once loaded): "
    "Python 3.10+; 3.14+ through sys.remote_exec, older through gdb or lldb (a pending call "
    "the main thread runs at its next safe point). Needs the same user or root and ptrace "
    "allowed; each refusal says what to do. Without it gputop only says how"
)


def add_attach_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--attach", action="store_const", const=True, help=ATTACH_HELP)
    p.add_argument(
        "--stacks-budget",
        type=budget_percent,
        metavar="PCT",
        help="with --pid: the CPU py-spy may use, in %% of one core (default 2): processes "
        "without gputop's agent are read within it, ranks first, DataLoader workers in turn",
    )


def budget_percent(text: str) -> float:
    """``--stacks-budget``'s value as a share of one core (2 -> 0.02)."""
    try:
        pct = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of percent") from None
    if not 0 < pct <= 100:
        raise argparse.ArgumentTypeError(f"{text}: give a percent of one core above 0, up to 100")
    return pct / 100


def add_output_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--record",
        type=Path,
        metavar="FILE",
        help="also write the session to FILE (every reading and verdict; `gputop replay FILE`, "
        "`gputop report FILE`)",
    )
    p.add_argument(
        "--prometheus",
        metavar="[ADDR:]PORT",
        help="serve Prometheus metrics on PORT (localhost unless ADDR is given; the metrics: "
        "`gputop docs prometheus`)",
    )


def command_of(args: argparse.Namespace) -> list[str]:
    """The command after ``--`` (argparse keeps the separator in a REMAINDER)."""
    return args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd


def ui_config(args: argparse.Namespace, terminal: bool = True) -> Config:
    from gputop.config import load_config, with_flags, with_no_color

    config = with_no_color(
        with_flags(
            load_config(args.config),
            interval=args.interval,
            color=args.color,
            theme=args.theme,
            mouse=args.mouse,
            low_bandwidth=args.low_bandwidth,
        )
    ).effective()
    if getattr(args, "theme", None):  # asked for on the command line: known before anything opens
        check_theme(config)
    if terminal:
        require_terminal()
    return config


def require_terminal() -> None:
    """NoTerminal unless stdin and stdout are a terminal: the screen modes check before they
    start anything (a job, a recording)."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise NoTerminal(
            "the live screen needs a terminal (stdin and stdout are not one here): use "
            "`gputop diagnose`, `gputop record`, `gputop snapshot`, or `gputop run --no-tui`"
        )


class NoTerminal(CannotDo):
    """A screen mode started without a terminal (a pipe, /dev/null, cron): one line, exit 1.
    Textual would start anyway and busy-poll its input thread long after the job ended."""

    when = "a screen mode started where stdin or stdout is not a terminal"


def check_theme(config: Config) -> None:
    """UsageError (exit 2, with the valid names) for a --theme no folder or Textual has. Sets
    the terminal's colour environment first: Textual reads it once, when it is imported."""
    from gputop.ui.terminal import apply_terminal_env

    apply_terminal_env(config.color, config.low_bandwidth)
    from textual.theme import BUILTIN_THEMES

    from gputop.ui.themes import all_theme_dirs, load_themes

    ours = [t.name for t in load_themes(all_theme_dirs(config.themes_dir))[0]]
    if config.theme in ours or config.theme in BUILTIN_THEMES:
        return
    raise UsageError(
        f"--theme {config.theme}: no such theme; gputop's: {', '.join(ours)}; Textual's: "
        f"{', '.join(sorted(BUILTIN_THEMES))}"
    )


# ---- the GPU source ----


@dataclass(frozen=True)
class Board:
    """A simulated board to install below pynvml before NVML is opened."""

    spec: str
    driver: str | None = None
    scenario: str | Scenario = "idle"
    """A scenario name, or a Scenario (the PhaseFollower's)."""
    seed: int = 0
    warmup_s: float = 300.0

    def checked(self) -> Board:
        """Itself, once its names are known to the simulator (SimConfigError otherwise): a bad
        --sim-board stops the command before anything starts (a job, a screen)."""
        from gputop.sim.board import SimBoard

        SimBoard(self.spec, self.driver, self.scenario, self.seed)
        return self

    short_label: bool = False
    """The demo's banner label (board and workload) instead of the full one."""


def board_from_flags(
    args: argparse.Namespace, follower: PhaseFollower | None = None
) -> Board | None:
    """The --sim-* flags as a Board (None without --sim-board); with a ``follower`` the
    board's activity follows the real process's phases."""
    from gputop.sim import SimConfigError

    if not args.sim_board:
        if args.sim_driver or args.sim_scenario != "idle":
            raise SimConfigError("--sim-driver and --sim-scenario need --sim-board")
        return None
    scenario = follower.scenario() if follower is not None else args.sim_scenario
    return Board(args.sim_board, args.sim_driver, scenario, args.seed).checked()


def follower_for(args: argparse.Namespace, target: object) -> PhaseFollower | None:
    """A PhaseFollower when a simulated board with no scripted workload watches a real process:
    the board is then busy while the process computes (from its agent's phases, or from its
    stacks when it has no agent), as a real GPU would be."""
    if not getattr(args, "sim_board", None) or target is None or args.sim_scenario != "idle":
        return None
    from gputop.sim.scenarios import PhaseFollower

    return PhaseFollower()


@dataclass(frozen=True)
class Gpus:
    """The GPU source a command reads: NVML (over the real driver or a simulated board), or
    ``NoGpus`` with the reason when NVML cannot be used."""

    source: NvmlSource | NoGpus
    simulated: str | None
    """The SIMULATED label, or None on a real driver."""
    watchdog: Watchdog
    """The deadline NVML was opened under (snapshot reads through it too)."""
    problem: str | None = None
    """Why NVML cannot be used, with what to do about it (None: it is open)."""

    @property
    def missing(self) -> str | None:
        """Why there are no GPU readings, without the advice (None: NVML is open)."""
        from gputop.sources.feeds import NoGpus

        return self.source.reason if isinstance(self.source, NoGpus) else None

    def close(self) -> None:
        if not self.watchdog.stalled:
            self.watchdog.call(self.source.close)


def open_gpus(
    board: Board | None = None, timeout: float = 10.0, only: GpuChoice | None = None
) -> Gpus:
    """The one way gputop opens its GPU source: installs the simulated board when asked, then
    opens NVML under a deadline (a wedged driver cannot hang gputop). When NVML cannot be used
    the source is ``NoGpus`` with one line saying why; each command decides whether it can go
    on without GPUs. ``only``: the GPUs to watch (``gpu_choice``); one it does not find is a
    NoSuchGpu (a usage error)."""
    from gputop.sources.feeds import NoGpus
    from gputop.sources.gpu_choice import NoSuchGpu
    from gputop.sources.nvml import NvmlSource
    from gputop.sources.nvml_errors import NvmlUnavailable
    from gputop.sources.watchdog import SourceStalled, Watchdog

    simulated = None
    if board is not None:
        from gputop.sim import start_simulated_board

        sim = start_simulated_board(
            board.spec, board.driver, board.scenario, board.seed, board.warmup_s
        )
        simulated = (
            sim.short_label
            if board.short_label
            else f"{sim.spec.label}, driver {sim.driver.version}, scenario {sim.scenario.key}"
        )
    watchdog = Watchdog("NVML", timeout=timeout)
    try:
        return Gpus(watchdog.call(lambda: NvmlSource.open(only=only)), simulated, watchdog)
    except NoSuchGpu:
        watchdog.close()
        raise
    except NvmlUnavailable as e:
        return Gpus(NoGpus(e.what), simulated, watchdog, str(e))
    except SourceStalled as e:
        return Gpus(NoGpus(str(e)), simulated, watchdog, str(e))


# ---- the target ----


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


def attach(pid: int | None, stacks_budget: float | None = None) -> Attached:
    """The sources for ``pid`` (nothing for None); TargetNotFound propagates (one line).
    ``stacks_budget``: py-spy's CPU as a share of one core (default ``DEFAULT_SHARE``)."""
    if pid is None:
        return Attached()
    from gputop.sources.host import HostSource

    return with_tree(HostSource.open(pid), pid, stacks_budget=stacks_budget)


def with_tree(
    host: HostSource | None,
    pid: int,
    identity: TargetId | None = None,
    stacks_budget: float | None = None,
) -> Attached:
    """The agent link and the stack sampler of ``pid`` beside its host source (which may be
    None: a job that exited before it could be read still has its agents' last words). All
    follow one identity (the host source's, else ``identity``): once the target has exited,
    a later process given its PID is neither sampled nor searched for agents; and all read
    one walk of the process tree (``ProcTree``)."""
    from gputop.model.host import merge_hints
    from gputop.sources.agent_link import AgentLink
    from gputop.sources.proc_tree import ProcTree
    from gputop.sources.stack_budget import DEFAULT_SHARE, StackBudget
    from gputop.sources.stacks import StackSource

    identity = getattr(host, "identity", None) or identity
    tree = getattr(host, "tree", None) or ProcTree(pid, identity=identity)
    if host is not None:
        host.tree = tree
    link = AgentLink(pid, pids=tree.agent_pids)
    budget = StackBudget(stacks_budget if stacks_budget is not None else DEFAULT_SHARE)
    stacks = StackSource(pid, hints=link.hints, identity=identity, tree=tree,
                         agent_stacks=link.stacks, budget=budget)  # fmt: skip
    if host is not None:  # roles settled by all the evidence: the tree, the stacks, the agents
        host.hints = lambda: merge_hints(stacks.hints(), link.hints())
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


# ---- the session and its outputs ----


def open_outputs(args: argparse.Namespace, mode: str, record: Path | None = None) -> Sinks:
    """The --record and --prometheus sinks of a live mode, opened before anything starts so
    that a bad flag stops the command at once (a SinkError: one line)."""
    from gputop.sinks import Sinks

    record = record if record is not None else getattr(args, "record", None)
    prometheus = getattr(args, "prometheus", None)
    opened: list[Sink] = []
    if record is not None:
        from gputop.record.writer import Recorder

        opened.append(Recorder(record))
    if prometheus is not None:
        from gputop.export.prometheus import ExportError, open_exporter

        try:
            opened.append(open_exporter(prometheus))
        except ExportError:
            for sink in opened:
                sink.close()
            raise
    sinks = Sinks(opened)
    sinks.meta = {"mode": mode}
    return sinks


def new_session(
    gpus: Gpus, sinks: Sinks | None = None, follower: PhaseFollower | None = None
) -> Session:
    """The session of a live mode over the GPUs that were opened."""
    from gputop.session import Session

    return Session(gpus.source.devices, sinks=sinks, follower=follower)


def close_session(session: Session | None) -> None:
    """Close the outputs, then say where the recording is and what went wrong on the way."""
    if session is None:
        return
    # the sinks that write bytes are the recorders (not isinstance: that would load the writer
    # into every session that records nothing)
    recorders = cast(
        "list[Recorder]", [s for s in session.sinks.sinks if hasattr(s, "bytes_written")]
    )
    for problem in session.close():
        print(f"gputop: {problem}", file=sys.stderr)
    for r in recorders:
        if r.bytes_written:  # one that never started removed its empty file
            print(f"gputop: recorded to {r.path} (gputop replay / gputop report)", file=sys.stderr)


def run_tui(
    gpus: Gpus,
    config: Config,
    session: Session,
    attached: Attached = Attached(),
    job: Job | None = None,
    attach_now: bool = False,
) -> int:
    """The live screen over ``session``. Imports Textual only now: its colour system must come
    from the environment first."""
    from gputop.ui.terminal import apply_terminal_env

    apply_terminal_env(config.color, config.low_bandwidth)
    from gputop.ui.app import GputopApp, Target

    target = None
    if attached.host is not None:
        target = Target(pid=attached.host.pid, command=attached.command() or "?")
    extra = (f"no GPU data: {gpus.missing}",) if gpus.missing else ()
    offer = None
    if target is not None and job is None:
        from gputop.ui.load_agent import AgentOffer

        offer = AgentOffer(target.pid, now=attach_now, identity=attached.identity)
    app = GputopApp(
        gpus.source,
        config=config,
        simulated=gpus.simulated,
        host=attached.host,
        target=target,
        agents=attached.agents,
        job=job,
        stacks=attached.stacks,
        extra_problems=extra,
        session=session,
        offer=offer,
    )
    session.start(
        {"simulated": gpus.simulated, "interval": app.interval,
         "pid": target.pid if target else None, "command": target.command if target else None}
    )  # fmt: skip
    try:
        app.run(mouse=config.mouse)
    finally:
        gpus.close()
        close_session(session)
    return app.return_code or 0
