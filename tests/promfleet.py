"""Recorded scrapes of several nodes -> promtool tests of the fleet rules
(deploy/prometheus/tests/fleet/).

One training job of NODES nodes of two ranks each (tests/corpus/node_ranks.py: one DDP group
across every node, so the whole job waits for its slowest node in each all-reduce), every node
watched by its own ``gputop diagnose --prometheus`` on a simulated board, one node (ODD) made
different. The nodes are scraped together once a second; each node's series get the
``instance`` and ``training_job`` labels the scrape config gives them (deploy/README.md, "Many
nodes"), and are continued past the window as tests/promseries.py continues one node's.

Regenerate the committed tests (from the repository root, with torch installed)::

    PYTHONPATH=. python tests/promfleet.py [SCENARIO...]
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promseries import (
    DEPLOY,
    HOLD_S,
    READY_S,
    Series,
    flow,
    input_lines,
    read_rules,
    render,
    samples,
    series_of,
)
from tests_support import free_port, kill_tree, scrape, until_or_none

REPO = Path(__file__).resolve().parents[1]
FLEET_RULES = DEPLOY / "gputop-fleet.yml"
FLEET_TESTS = DEPLOY / "tests" / "fleet"
NODES = 3
ODD = 3
"""The node made different (node-3 of node-1..node-3)."""
TRAINING_JOB = "llm-pretrain"
PY = sys.executable
PER_NODE = 2
"""Ranks per node (tests/corpus/node_ranks.py's PER_NODE)."""
STUCK_S = 8.0
"""``ready="stuck"``: every node has a rank in one phase this long (past promseries.CLOCK_RUN
scrapes, so the recorded ages are continued as clocks)."""
STEPS = 100
"""``ready="steps"``: each of a node's ranks has taken this many steps (past the start)."""


@dataclass(frozen=True)
class FleetScenario:
    """A job whose node ODD differs from the others, and the fleet alerts it must raise."""

    name: str
    odd: tuple[str, ...]
    """node_ranks.py options of node ODD (the others run with none)."""
    ready: str
    """``steps`` (every rank of every node past STEPS steps) or ``stuck`` (every node has a
    rank in one phase for STUCK_S)."""
    expect: frozenset[str] = frozenset()
    """The fleet alerts that fire, each naming node ODD; every other must stay quiet."""
    window_s: int = 12


FLEET_SCENARIOS: dict[str, FleetScenario] = {
    s.name: s
    for s in (
        # its forward takes 30% longer: every other node waits for it in each all-reduce
        FleetScenario("slow_node", ("--work-ms", "52"), "steps",
                      frozenset({"GputopSlowNode"})),
        FleetScenario("equal_nodes", (), "steps"),
        # each of its reads takes 20 ms: its ranks wait for data, and so it is the slow node
        FleetScenario("node_waits_for_data", ("--read-ms", "20"), "steps",
                      frozenset({"GputopNodeWaitsForData", "GputopSlowNode"})),
        # its loader blocks for good: its ranks sit in data_wait, every other rank in grad_sync
        FleetScenario("node_hung", ("--stall-after", "150"), "stuck",
                      frozenset({"GputopNodeHung"})),
    )
}  # fmt: skip


def instance(node: int) -> str:
    """The ``instance`` label Prometheus gives node N's gputop (1-based)."""
    return f"node-{node}:9401"


def node_command(
    metrics_port: int, rendezvous: int, node: int, nodes: int, seconds: float, *opts: str
) -> list[str]:
    """``gputop diagnose --prometheus`` watching node ``node`` (1-based) of a node_ranks job."""
    return [
        PY, "-m", "gputop", "diagnose", "--duration", str(seconds + 10), "--interval", "0.5",
        "--sim-board", "h100x2", "--sim-scenario", "compute",
        "--prometheus", f"127.0.0.1:{metrics_port}", "--",
        PY, "tests/corpus/node_ranks.py", "--seconds", str(seconds), "--port", str(rendezvous),
        "--node", str(node - 1), "--nodes", str(nodes), *opts,
    ]  # fmt: skip


def start_node(cmd: list[str], log: Path) -> subprocess.Popen:
    """A node's gputop with its job; everything both print goes to ``log`` (the verdicts as
    they change and how the watch ended: a node that stops early says why there)."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "PYTHONPATH": str(REPO)}
    with log.open("wb") as out:
        return subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, cwd=REPO, env=env, start_new_session=True
        )


def odd_opts(sc: FleetScenario, node: int) -> tuple[str, ...]:
    return sc.odd if node == ODD else ()


def rule_series() -> set[str]:
    """The gputop series the fleet rules read: only those are recorded."""
    return set(re.findall(r"\bgputop_\w+", FLEET_RULES.read_text()))


def record(sc: FleetScenario, logs: Path) -> list[list[dict[str, Any]]]:
    """Run the job, wait until every node is ``ready``, then scrape every node once a second
    for the window: one list of scrapes per node."""
    ports = [free_port() for _ in range(NODES)]
    rendezvous = free_port()
    procs = [
        start_node(
            node_command(port, rendezvous, n, NODES, sc.window_s + READY_S + 10, *odd_opts(sc, n)),
            logs / f"node-{n}.log",
        )
        for n, port in enumerate(ports, start=1)
    ]
    try:
        _wait_ready(sc, ports, procs, logs)
        scrapes: list[list[dict[str, Any]]] = [[] for _ in ports]
        tick = time.monotonic()
        for _ in range(sc.window_s):
            tick += 1.0
            time.sleep(max(0.0, tick - time.monotonic()))  # pacing: a scrape a second
            for n, port in enumerate(ports):
                fams = scrape(port)
                if fams is None:
                    raise RuntimeError(f"node-{n + 1} stopped answering: {_tail(logs, n + 1)}")
                scrapes[n].append(fams)
        return scrapes
    finally:
        for p in procs:
            kill_tree(p)


def _tail(logs: Path, node: int) -> str:
    return (logs / f"node-{node}.log").read_text(errors="replace")[-2000:]


def _wait_ready(sc: FleetScenario, ports: list[int], procs: list[Any], logs: Path) -> None:
    def ready() -> bool:
        for n, p in enumerate(procs, start=1):
            if p.poll() is not None:
                raise RuntimeError(
                    f"node-{n}'s gputop exited with {p.returncode}: {_tail(logs, n)}"
                )
        fams = [scrape(port) for port in ports]
        return all(f and _ready(sc.ready, f) for f in fams)

    if until_or_none(ready, timeout=READY_S, every=0.5) is None:
        raise RuntimeError(
            f"{sc.name}: not every node {sc.ready} within {READY_S} s: {_tail(logs, ODD)}"
        )


def _ready(cond: str, fams: dict[str, Any]) -> bool:
    if cond == "stuck":
        return any(s.value >= STUCK_S for s in samples(fams, "gputop_open_phase_age_seconds"))
    steps = [s.value for s in samples(fams, "gputop_steps_total")]
    return len(steps) == PER_NODE and min(steps) >= STEPS


def fleet_series(scrapes: list[list[dict[str, Any]]]) -> Series:
    """Every node's series the fleet rules read, each under its node's ``instance`` and the
    job's ``training_job``."""
    out: Series = {}
    for n, node in enumerate(scrapes, start=1):
        out.update(series_of(node, instance(n), {"training_job": TRAINING_JOB}, rule_series()))
    return out


def promtool_test(sc: FleetScenario, scrapes: list[list[dict[str, Any]]], rules: str) -> str:
    """A promtool rule-test file: every node's recorded series, continued, and each fleet
    alert expected 15 minutes in (naming node ODD) or not at all."""
    odd = " ".join(sc.odd) or "(none)"
    out = [
        f"# Generated by tests/promfleet.py from real gputop scrapes ({sc.name}): {NODES} nodes",
        "# of python tests/corpus/node_ranks.py (one job, 2 ranks per node), each watched by",
        "#   gputop diagnose --sim-board h100x2 --sim-scenario compute --prometheus ...",
        f"# node-{ODD} started with {odd}. {sc.window_s} scrapes 1 s apart, then held steady for"
        f" {HOLD_S} s.",
        *input_lines(sc.name, rules, fleet_series(scrapes)),
    ]
    out.append("    alert_rule_test:")
    for rule in read_rules(FLEET_RULES):
        out += [f"      - eval_time: {HOLD_S}s", f"        alertname: {rule.name}"]
        if rule.name not in sc.expect:
            out.append("        exp_alerts: []")
            continue
        labels = {"instance": instance(ODD), "training_job": TRAINING_JOB}
        ranks = _ranks_of(scrapes[ODD - 1])
        notes = {k: render(_name_ranks(v, ranks), labels) for k, v in rule.annotations.items()}
        out.append("        exp_alerts:")
        out.append(f"          - exp_labels: {flow({**labels, **rule.labels})}")
        out.append(f"            exp_annotations: {flow(notes)}")
    return "\n".join(out) + "\n"


RANKS_BLOCK = re.compile(
    r"{{ range \$i, \$r := query .*? }}{{ if \$i }}, {{ end }}{{ \$r\.Labels\.rank }}{{ end }}"
)
"""An annotation's list of the node's ranks (a query in the template, which promtool runs)."""


def _ranks_of(node: list[dict[str, Any]]) -> list[str]:
    """The node's ranks as the annotation lists them: sorted as strings (``sortByLabel``)."""
    return sorted({s.labels["rank"] for s in samples(node[-1], "gputop_steps_total")})


def _name_ranks(template: str, ranks: list[str]) -> str:
    """The template with its ranks list written out: every rank of the node the alert names
    (in these scenarios the odd node's ranks are all slow, all waiting, or all stuck)."""
    return RANKS_BLOCK.sub(lambda _: ", ".join(ranks), template)


def main() -> None:
    """Record every fleet scenario and write deploy/prometheus/tests/fleet/<name>.yml."""
    FLEET_TESTS.mkdir(parents=True, exist_ok=True)
    for sc in (FLEET_SCENARIOS[n] for n in sys.argv[1:] or list(FLEET_SCENARIOS)):
        with tempfile.TemporaryDirectory(prefix="gputop-promfleet-") as logs:
            text = promtool_test(sc, record(sc, Path(logs)), "../../gputop-fleet.yml")
        (FLEET_TESTS / f"{sc.name}.yml").write_text(text)
        print(f"wrote {FLEET_TESTS / sc.name}.yml")


if __name__ == "__main__":
    main()
