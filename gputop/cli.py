"""The ``gputop`` command line: parses flags and hands over to one subcommand.

Kept free of Textual imports at module level: the colour system must be chosen (environment
variables) before Textual is imported, and headless commands should not pay for it at all.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from gputop import __version__


def _add_sim_flags(p: argparse.ArgumentParser) -> None:
    from gputop.sim import BOARDS, DRIVERS, SCENARIOS

    boards = ", ".join(sorted(BOARDS))
    p.add_argument(
        "--sim-board",
        metavar="NAME",
        help=f"read a simulated board instead of the real driver: {boards}; "
        "a count (h100x8) and -mig (a100-mig) may follow",
    )
    p.add_argument(
        "--sim-driver",
        metavar="GEN",
        default=None,
        help=f"driver generation of the simulated board: {', '.join(DRIVERS)} (default: newest)",
    )
    p.add_argument(
        "--sim-scenario",
        metavar="NAME",
        default="idle",
        help=f"workload on the simulated board: {', '.join(SCENARIOS)} (default: idle)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the simulated board's noise")


def _add_ui_flags(
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
        type=float,
        metavar="S",
        help="seconds between screen updates, 0.5..10 (default 2; 5 with --low-bandwidth)",
    )
    p.add_argument(
        "--color",
        choices=COLOR_MODES,
        help="colours to use (default auto: from COLORTERM and TERM); mono is black and white",
    )
    p.add_argument("--theme", metavar="NAME", help="theme name (default gputop-dark)")
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
    _add_output_flags(p)
    p.add_argument(
        "--pid",
        type=int,
        metavar="PID",
        help="the training process to attach to (its DataLoader workers and children too)",
    )


def _add_output_flags(p: argparse.ArgumentParser) -> None:
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
        help="serve Prometheus metrics on PORT (localhost unless ADDR is given; "
        "docs/prometheus.md)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gputop",
        description="Attach to a training job and see why it is slow: GPU, host, stacks, steps. "
        "With no command, gputop opens the live monitor on this machine's GPUs.",
    )
    parser.add_argument("--version", action="version", version=f"gputop {__version__}")
    _add_ui_flags(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = sub.add_parser(
        "demo",
        help="the live monitor on a simulated board (no GPU needed)",
        description="Run the live monitor against a simulated board with a scripted workload.",
    )
    from gputop.sim import BOARDS, SCENARIOS

    demo.add_argument(
        "--board",
        default="h100x8",
        help=f"simulated board: {', '.join(sorted(BOARDS))} with an optional count "
        "and -mig (default h100x8)",
    )
    demo.add_argument(
        "--scenario",
        default="mixed",
        help=f"workload: {', '.join(SCENARIOS)} (default mixed: a different one per GPU)",
    )
    demo.add_argument("--driver", default=None, help="simulated driver generation")
    demo.add_argument("--seed", type=int, default=0, help="seed of the simulated board's noise")
    demo.add_argument(
        "--trainer",
        metavar="KNOBS",
        help="also run the example MLP trainer with these knobs (quoted, e.g. "
        "'--workers 0 --slow-transform-ms 50'; see examples/README.md) and attach to it: the "
        "simulated GPU then follows its phases",
    )
    _add_ui_flags(demo, under_command=True)
    diag = sub.add_parser(
        "diagnose",
        help="the verdict without a screen: a timeline and the findings (text or --json)",
        description="Watch the GPUs (and a process, with --pid or -- CMD) for --duration seconds "
        "and print the verdict timeline and the final findings with evidence and levers.",
    )
    diag.add_argument("--pid", type=int, metavar="PID", help="the training process to diagnose")
    diag.add_argument("--duration", type=float, default=30.0, help="seconds to watch (default 30)")
    diag.add_argument("--interval", type=float, default=1.0, help="seconds between readings")
    diag.add_argument("--json", action="store_true", help="JSON (schema: docs/diagnose.md)")
    diag.add_argument("--log", type=Path, metavar="FILE", help="where CMD's output goes")
    _add_output_flags(diag)
    _add_sim_flags(diag)
    diag.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...")
    rec = sub.add_parser(
        "record",
        help="record a training process without a screen (replay or report it later)",
        description="Read the GPUs, the process tree, its agents and stacks, and write every "
        "reading and verdict to FILE until the process exits, --duration passes or ctrl+c.",
    )
    rec.add_argument("--pid", type=int, required=True, metavar="PID", help="the process to record")
    rec.add_argument("-o", "--output", type=Path, required=True, metavar="FILE",
                     help="the recording to write (never overwritten)")  # fmt: skip
    rec.add_argument("--duration", type=float, metavar="S", help="stop after S seconds")
    rec.add_argument("--interval", type=float, default=2.0, help="seconds between readings")
    rec.add_argument("--prometheus", metavar="[ADDR:]PORT", help="also serve Prometheus metrics")
    _add_sim_flags(rec)
    rep_ = sub.add_parser(
        "replay",
        help="the live screen over a recording, with pause, seek and speed keys",
        description="Play a recording in the live monitor's screen.",
    )
    rep_.add_argument("file", type=Path, metavar="FILE", help="a recording (--record FILE)")
    rep_.add_argument("--speed", type=float, default=1.0, help="playback speed (default 1)")
    rep_.add_argument(
        "--check",
        action="store_true",
        help="recompute every verdict from the recorded readings, compare, and exit",
    )
    _add_ui_flags(rep_, under_command=True, live=False)
    report = sub.add_parser(
        "report",
        help="a summary of a recording to read or paste: verdicts, steps, GPUs, findings",
        description="Summarise a recording: time per verdict, step times and phases, MFU, "
        "throttling, ranks, findings with levers, captures, charts.",
    )
    report.add_argument("file", type=Path, metavar="FILE", help="a recording (--record FILE)")
    report.add_argument("--json", action="store_true", help="JSON (schema: docs/report.md)")
    report.add_argument("--no-charts", action="store_true", help="leave out the charts")
    run = sub.add_parser(
        "run",
        help="start a training command with the agent enabled, and attach to it",
        description="Run CMD with gputop's agent in every Python process it starts (no code "
        "change), and watch it. Signals reach the whole job; gputop exits with its exit code.",
    )
    run.add_argument(
        "--no-tui",
        action="store_true",
        help="no screen: the job's output passes through, a per-rank summary is printed at the end",
    )
    run.add_argument("--log", type=Path, metavar="FILE", help="where the job's output goes")
    run.add_argument(
        "--nsys",
        action="store_true",
        help="start CMD inside an Nsight Systems session (nsys launch), so that the n key and "
        "`gputop capture nsys` can record a window of it later",
    )
    _add_ui_flags(run, under_command=True)
    run.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...")
    snap = sub.add_parser(
        "snapshot",
        help="print one reading of every GPU (a table, or JSON with --json)",
        description="Take one reading of every GPU and print it. Exits 1 when NVML is missing.",
    )
    snap.add_argument("--json", action="store_true", help="print JSON (schema: docs/snapshot.md)")
    snap.add_argument(
        "--pid", type=int, metavar="PID", help="also read this process tree (host data)"
    )
    snap.add_argument(
        "--timeout",
        type=float,
        default=5.0,
        help="seconds to wait for the driver before giving up (default 5)",
    )
    _add_sim_flags(snap)
    cap = sub.add_parser(
        "capture",
        help="take one bounded capture of a process for later analysis",
        description="Take one bounded capture of PID and its subprocesses into a private folder "
        "with a manifest (docs/captures.md): pyspy-flame records S seconds of stacks "
        "(speedscope JSON and an SVG flame graph), pyspy-dump every thread now (text and JSON), "
        "torch-trace N steps of torch.profiler and memory-snapshot the CUDA allocator's history "
        "over N steps, in every process that runs gputop's agent; nsys an Nsight Systems window "
        "of a job started by `gputop run --nsys`.",
    )
    cap.add_argument(
        "kind",
        choices=("pyspy-flame", "pyspy-dump", "torch-trace", "memory-snapshot", "nsys"),
        help="what to capture",
    )
    cap.add_argument("--pid", type=int, required=True, metavar="PID", help="the target process")
    cap.add_argument(
        "--seconds", type=float, help="pyspy-flame (max 120) / nsys (max 60): how long (default 10)"
    )
    cap.add_argument("--rate", type=int, help="pyspy-flame: samples per second (default 50)")
    cap.add_argument(
        "--steps", type=int, help="torch-trace (default 3) / memory-snapshot (default 5): steps"
    )
    cap.add_argument(
        "--max-mb", type=float, help="byte cap in MiB (flame 200, dump 50, trace 500, memory 1024)"
    )
    cap.add_argument(
        "--dir",
        metavar="DIR",
        help="where capture folders go (default $GPUTOP_CAPTURE_DIR or ./gputop-captures)",
    )
    for flag, what in (("--record-shapes", "input shapes"), ("--with-stack", "Python stacks"),
                       ("--profile-memory", "allocations")):  # fmt: skip
        cap.add_argument(flag, action="store_true", help=f"torch-trace: also record {what}")
    cap.add_argument("--json", action="store_true", help="print the manifest as JSON")
    return parser


def _install_sim(args: argparse.Namespace, follower=None) -> str | None:
    """Install the simulated board when asked; returns its label or None. With a
    ``follower``, the board's activity follows the real process's phases."""
    from gputop.sim import SimConfigError, start_simulated_board

    if not args.sim_board:
        if args.sim_driver or args.sim_scenario != "idle":
            raise SimConfigError("--sim-driver and --sim-scenario need --sim-board")
        return None
    scenario = follower.scenario() if follower is not None else args.sim_scenario
    board = start_simulated_board(
        args.sim_board, args.sim_driver, scenario, args.seed, warmup_s=300.0
    )
    return f"{board.spec.label}, driver {board.driver.version}, scenario {board.scenario.key}"


def cmd_snapshot(args: argparse.Namespace) -> int:
    from gputop.render.text import render_snapshot
    from gputop.snapshot import build_document, sample_pair
    from gputop.sources.nvml import NvmlSource
    from gputop.sources.nvml_errors import NvmlUnavailable
    from gputop.sources.watchdog import SourceStalled, Watchdog

    simulated = _install_sim(args)
    host = _open_host(args.pid)
    watchdog = Watchdog("NVML", timeout=args.timeout)
    try:
        source = watchdog.call(NvmlSource.open)
    except NvmlUnavailable as e:
        print(f"gputop: {e}", file=sys.stderr)
        return 1
    except SourceStalled as e:
        print(f"gputop: {e}", file=sys.stderr)
        return 1
    link, stack_source = _attachments(host)
    try:
        if host is not None:
            host.sample()  # rates need two readings; sample_pair spaces them
            link.sample()  # connect; the backlog of steps arrives meanwhile
        samples = sample_pair(source, watchdog)
        host_sample = host.sample() if host is not None else None
        agents = link.sample() if link is not None else None
        stacks = stack_source.sample() if stack_source is not None else None
        doc = build_document(
            source.devices,
            source.capabilities,
            samples,
            simulated=simulated,
            host=host_sample,
            agents=agents,
            stacks=stacks,
        )
    except SourceStalled as e:
        print(f"gputop: {e}", file=sys.stderr)
        return 1
    finally:
        if not watchdog.stalled:
            watchdog.call(source.close)
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        sys.stdout.write(render_snapshot(doc))
    return 0


def _ui_config(args: argparse.Namespace):  # -> Config
    from gputop.config import load_config, with_flags

    config = with_flags(
        load_config(args.config),
        interval=args.interval,
        color=args.color,
        theme=args.theme,
        mouse=args.mouse,
        low_bandwidth=args.low_bandwidth,
    )
    return config.effective()


def _open_host(pid: int | None):
    """The host source for ``--pid``, or None; TargetNotFound propagates (one line)."""
    if pid is None:
        return None
    from gputop.sources.host import HostSource

    return HostSource.open(pid)


def _attachments(host):
    """The agent link and the stack sampler for an attached target (or None, None)."""
    if host is None:
        return None, None
    from gputop.sources.agent_link import AgentLink
    from gputop.sources.stacks import StackSource

    return AgentLink(host.pid), StackSource(host.pid)


def _sinks(args: argparse.Namespace, mode: str, **meta):
    """The --record and --prometheus sinks of a live mode (SinkError: one line)."""
    from gputop.sinks import open_sinks

    record = getattr(args, "record", None) if mode != "record" else args.output
    sinks = open_sinks(record, getattr(args, "prometheus", None))
    sinks.meta = {"mode": mode, **meta}
    return sinks


def _close_sinks(sinks) -> None:
    """Close, then say where the recording is and what went wrong on the way."""
    if sinks is None:
        return
    recorders = [s for s in sinks.sinks if hasattr(s, "bytes_written")]
    sinks.close()
    for problem in sinks.problems:
        print(f"gputop: {problem}", file=sys.stderr)
    for r in recorders:
        if r.bytes_written:  # one that never started removed its empty file
            print(f"gputop: recorded to {r.path} (gputop replay / gputop report)", file=sys.stderr)


def _run_tui(
    source,
    config,
    simulated: str | None,
    host=None,
    agents=None,
    job=None,
    stacks=None,
    sinks=None,
) -> int:
    """Import Textual only now: its colour system must come from the environment first."""
    from gputop.ui.terminal import apply_terminal_env

    apply_terminal_env(config.color, config.low_bandwidth)
    from gputop.ui.app import GputopApp, Target

    target = None
    if host is not None:
        main = host.sample().main
        target = Target(pid=host.pid, command=(main.cmdline or main.name) if main else "?")
    extra = (f"no GPU data: {source.reason}",) if getattr(source, "reason", None) else ()
    app = GputopApp(
        source,
        config=config,
        simulated=simulated,
        host=host,
        target=target,
        agents=agents,
        job=job,
        stacks=stacks,
        extra_problems=extra,
        sinks=sinks,
    )
    if sinks:
        sinks.start(
            tuple(source.devices),
            {**sinks.meta, "simulated": simulated, "interval": app.interval,
             "pid": target.pid if target else None,
             "command": target.command if target else None},
        )  # fmt: skip
    try:
        app.run(mouse=config.mouse)
    finally:
        source.close()
        _close_sinks(sinks)
    return app.return_code or 0


def cmd_monitor(args: argparse.Namespace) -> int:
    from gputop.sources.nvml import NvmlSource
    from gputop.sources.nvml_errors import NvmlUnavailable
    from gputop.sources.watchdog import SourceStalled, Watchdog

    config = _ui_config(args)
    host = _open_host(args.pid)
    agents, stacks = _attachments(host)
    sinks = _sinks(args, "monitor")
    try:
        source = Watchdog("NVML", timeout=10.0).call(NvmlSource.open)
    except (NvmlUnavailable, SourceStalled) as e:
        what = e.what if isinstance(e, NvmlUnavailable) else str(e)
        print(
            f"gputop: {what}. `gputop demo` shows the live monitor on a simulated board "
            "(no GPU needed).",
            file=sys.stderr,
        )
        _close_sinks(sinks)
        return 1
    return _run_tui(
        source, config, simulated=None, host=host, agents=agents, stacks=stacks, sinks=sinks
    )


def cmd_demo(args: argparse.Namespace) -> int:
    from gputop.sim import start_simulated_board
    from gputop.sources.nvml import NvmlSource

    config = _ui_config(args)
    sinks = _sinks(args, "demo")
    job = follower = None
    scenario = args.scenario
    pid = getattr(args, "pid", None)
    if args.trainer is not None:
        import shlex

        from gputop.resources import bundled_examples_dir
        from gputop.run import Job
        from gputop.sim.scenarios import PhaseFollower

        script = bundled_examples_dir() / "mlp_train.py"
        knobs = shlex.split(args.trainer)  # a list for exec: no shell is involved
        job = Job([sys.executable, str(script), "--steps", "100000000", *knobs], owned=True)
        job.forward_signals()
        pid = job.pid
        follower = PhaseFollower()
        scenario = follower.scenario()
    host = _open_host(pid)
    agents, stacks = _attachments(host)
    if follower is not None:
        agents = _Following(agents, follower)
    board = start_simulated_board(args.board, args.driver, scenario, args.seed, 120.0)
    source = NvmlSource.open()
    try:
        return _run_tui(
            source,
            config,
            simulated=board.short_label,
            host=host,
            agents=agents,
            stacks=stacks,
            job=job,
            sinks=sinks,
        )
    finally:
        if job is not None and job.poll() is None:
            job.stop()


class _Following:
    """An agent link whose readings also steer a PhaseFollower (the demo's simulated GPU)."""

    def __init__(self, link, follower) -> None:
        self.link = link
        self.follower = follower

    def sample(self):
        from gputop.diagnose.signals import step_signals

        sample = self.link.sample()
        steps = step_signals(sample)
        if steps is not None and steps.shares:
            self.follower.update(steps.shares)
        return sample


def cmd_run(args: argparse.Namespace) -> int:
    from gputop.run import Job, NoGpus, RunError, exit_status, run_headless
    from gputop.sources.agent_link import AgentLink
    from gputop.sources.host import HostSource
    from gputop.sources.nvml import NvmlSource
    from gputop.sources.nvml_errors import NvmlUnavailable

    command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    env = None
    if args.nsys and command:
        from gputop.capture import nsys

        binary = nsys.find_nsys()
        if binary is None:
            print(f"gputop: {nsys.NO_NSYS}", file=sys.stderr)
            return 127
        session = nsys.session_name(f"{os.getpid()}-{int(time.time())}")
        command, env = nsys.launch_argv(binary, session, command), {nsys.SESSION_ENV: session}
    if args.no_tui and (getattr(args, "record", None) or getattr(args, "prometheus", None)):
        print(
            "gputop: --record and --prometheus need the monitor: drop --no-tui, or start the job "
            "and run `gputop record --pid PID -o FILE` beside it",
            file=sys.stderr,
        )
        return 2
    sinks = None if args.no_tui else _sinks(args, "run")  # bad flags stop us before the job
    try:
        job = Job(command, log=args.log, passthrough=args.no_tui, env=env)
    except RunError as e:
        _close_sinks(sinks)
        print(f"gputop: {e}", file=sys.stderr)
        return 127
    link = AgentLink(job.pid)
    if args.no_tui:
        return run_headless(job, link)
    job.forward_signals()
    config = _ui_config(args)
    try:
        host = HostSource.open(job.pid, exit_code=job.exit_status)
    except Exception:
        host = None  # it already exited: the log says why
    try:
        source = NvmlSource.open()
    except NvmlUnavailable as e:
        source = NoGpus(e.what)
    from gputop.sources.stacks import StackSource

    _run_tui(
        source,
        config,
        simulated=None,
        host=host,
        agents=link,
        job=job,
        stacks=StackSource(job.pid),
        sinks=sinks,
    )
    if job.poll() is None:
        print(
            f"gputop: the job goes on as pid {job.pid}; its output: {job.log_path}",
            file=sys.stderr,
        )
        return 0
    code = exit_status(job.wait())
    tail = job.tail()
    if tail:
        print(tail)
    print(f"gputop: the job exited with status {code}; its output: {job.log_path}", file=sys.stderr)
    return code


def cmd_diagnose(args: argparse.Namespace) -> int:
    from gputop.headless import diagnose, document, render
    from gputop.run import Job, NoGpus, RunError, exit_status
    from gputop.sim import SimConfigError
    from gputop.sources.nvml import NvmlSource
    from gputop.sources.nvml_errors import NvmlUnavailable

    command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    follower = None
    if args.sim_board and (command or args.pid) and args.sim_scenario == "idle":
        from gputop.sim.scenarios import PhaseFollower

        follower = PhaseFollower()  # the simulated GPU follows the real process's phases
    simulated = _install_sim(args, follower)
    if command and args.pid:
        raise SimConfigError("give either --pid or a command after --, not both")
    sinks = _sinks(args, "diagnose")
    job = None
    if command:
        try:
            job = Job(command, log=args.log, owned=True)
        except RunError as e:
            print(f"gputop: {e}", file=sys.stderr)
            return 127
        job.forward_signals()
    pid = job.pid if job else args.pid
    host = _open_host(pid)
    agents, stacks = _attachments(host)
    try:
        gpu = NvmlSource.open()
    except NvmlUnavailable as e:
        gpu = NoGpus(e.what)
    stop = (lambda: job.poll() is not None) if job else (lambda: False)
    if sinks:
        sinks.start(tuple(gpu.devices), {**sinks.meta, "simulated": simulated, "pid": pid,
                    "command": command or None, "interval": args.interval})  # fmt: skip
    try:
        d = diagnose(
            gpu, host, agents, stacks, args.duration, args.interval, stop=stop,
            follower=follower, sinks=sinks,
        )  # fmt: skip
    finally:
        gpu.close()
        _close_sinks(sinks)
    stopped = False
    if job is not None:
        if job.poll() is None:  # the duration is over: a diagnosis must not leave jobs behind
            stopped = True
            d.exit_code = job.stop()
        else:
            d.exit_code = exit_status(job.poll())
    if isinstance(gpu, NoGpus):
        d.problems.insert(0, f"no GPU data: {gpu.reason}")
    if stopped:
        d.problems.append(f"the command was still running after {args.duration:g} s: stopped it")
    source = {"simulated": simulated, "pid": pid, "command": command or None,
              "log": str(job.log_path) if job and job.log_path else None}  # fmt: skip
    doc = document(d, source)
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        sys.stdout.write(render(doc))
    return 0


def cmd_record(args: argparse.Namespace) -> int:
    """Headless recording of a running process until it exits, --duration or ctrl+c."""
    import math
    import threading

    from gputop.headless import diagnose
    from gputop.run import NoGpus
    from gputop.sim.scenarios import PhaseFollower
    from gputop.sources.nvml import NvmlSource
    from gputop.sources.nvml_errors import NvmlUnavailable

    follower = PhaseFollower() if args.sim_board and args.sim_scenario == "idle" else None
    simulated = _install_sim(args, follower)
    host = _open_host(args.pid)
    agents, stacks = _attachments(host)
    sinks = _sinks(args, "record")
    try:
        gpu = NvmlSource.open()
    except NvmlUnavailable as e:
        gpu = NoGpus(e.what)
        print(f"gputop: no GPU data: {e.what}; recording the process only", file=sys.stderr)
    stopping = threading.Event()
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, lambda *_: stopping.set()) for sig in signals}
    sinks.start(tuple(gpu.devices), {**sinks.meta, "simulated": simulated, "pid": args.pid,
                "command": _command_of(host), "interval": args.interval})  # fmt: skip
    watched = _NoticingExit(host)
    print(f"gputop: recording pid {args.pid} to {args.output} (ctrl+c stops)", file=sys.stderr)
    try:
        d = diagnose(
            gpu, watched, agents, stacks, args.duration or math.inf, args.interval,
            stop=lambda: stopping.is_set() or watched.exited, follower=follower, sinks=sinks,
        )  # fmt: skip
    finally:
        gpu.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _close_sinks(sinks)
    for problem in d.problems:
        print(f"gputop: note: {problem}", file=sys.stderr)
    return 0


class _NoticingExit:
    """The host source, remembering whether the target has exited (a recording stops then,
    after the reading that says so: its exit code and last cgroup state are in the file)."""

    def __init__(self, host) -> None:
        self.host = host
        self.pid = host.pid
        self.exited = False

    def sample(self):
        h = self.host.sample()
        self.exited = h.state == "exited"
        return h


def _command_of(host) -> str | None:
    main = host.sample().main if host is not None else None
    return (main.cmdline or main.name) if main else None


def cmd_replay(args: argparse.Namespace) -> int:
    from gputop.record.reader import open_recording
    from gputop.record.replay import check

    recording = open_recording(args.file)
    if args.check:
        result = check(recording)
        print(result.text())
        return 0 if result.ok else 1
    config = _ui_config(args)
    from gputop.ui.terminal import apply_terminal_env

    apply_terminal_env(config.color, config.low_bandwidth)
    from gputop.ui.replay_app import run_replay

    return run_replay(recording, config, speed=args.speed)


def cmd_report(args: argparse.Namespace) -> int:
    from gputop.record.reader import open_recording
    from gputop.record.report import build_report, render_report

    recording = open_recording(args.file)
    doc = build_report(recording)
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        sys.stdout.write(render_report(doc, charts=not args.no_charts))
    if recording.damage:
        print(f"gputop: {args.file} {recording.damage}", file=sys.stderr)
    return 0


def _capture_dir_from_config() -> str | None:
    from gputop.config import load_config

    configured = load_config().capture_dir
    return str(configured) if configured is not None else None


def cmd_capture(args: argparse.Namespace) -> int:
    import threading

    from gputop.capture.folder import CaptureError, capture_root
    from gputop.capture.manifest import document
    from gputop.capture.take import Bounds, take

    cancel = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: cancel.set())  # ctrl+c: keep what we have
    max_bytes = int(args.max_mb * 2**20) if args.max_mb is not None else None
    try:
        m, folder = take(
            args.kind,
            args.pid,
            capture_root(args.dir or _capture_dir_from_config()),
            Bounds(args.seconds, args.rate, max_bytes, args.steps),
            cancel,
            options={
                k: True
                for k in ("record_shapes", "with_stack", "profile_memory")
                if getattr(args, k)
            },
        )
    except CaptureError as e:
        print(f"gputop: {e}", file=sys.stderr)
        return 2
    finally:
        signal.signal(signal.SIGINT, previous)
    if args.json:
        print(json.dumps(document(m), indent=2))
    else:
        why = f": {m.reason}" if m.reason else ""
        print(f"{m.kind} of pid {args.pid}: {m.status}{why}")
        print(f"  folder {folder.resolve()}")
        for f in m.files:
            print(f"  {f.path}  {f.bytes:,} bytes")
    return {"ok": 0, "partial": 0, "cancelled": 130}.get(m.status, 1)


def main(argv: Sequence[str] | None = None) -> int:
    # gputop itself must never start an agent, even inside a `gputop run` job's environment
    os.environ.pop("GPUTOP_AGENT_AUTOSTART", None)
    parser = build_parser()
    args = parser.parse_args(argv)
    from gputop.sim import SimConfigError
    from gputop.sources.host import TargetNotFound

    commands = {
        "snapshot": cmd_snapshot,
        "demo": cmd_demo,
        "run": cmd_run,
        "diagnose": cmd_diagnose,
        "capture": cmd_capture,
        "record": cmd_record,
        "replay": cmd_replay,
        "report": cmd_report,
        None: cmd_monitor,
    }
    from gputop.record.fileformat import RecordingError
    from gputop.sinks import SinkError

    try:
        return commands[args.command](args)
    except SimConfigError as e:
        parser.error(str(e))
    except (SinkError, RecordingError) as e:
        print(f"gputop: {e}", file=sys.stderr)
        return 2
    except TargetNotFound as e:
        print(f"gputop: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `gputop snapshot | head`
        return 0
