"""Many nodes through a real Prometheus: two training jobs of three simulated nodes each, every
node a `gputop diagnose --prometheus` over a simulated H100 board watching two real ranks of its
job (one DDP group over gloo across the job's three nodes, no gputop code in them); in one job
a node is 30% slower, and the others wait for it in each all-reduce; in the other all are
equal. A real Prometheus server (the same package as promtool)
scrapes them every second with deploy/prometheus/gputop-fleet.yml loaded: the slow-node alert
names that node and `gputop fleet --once --json` lists it first; nothing else fires at any poll,
and nothing else is even pending when it fires (the equal job included); every query of the
dashboard's nodes row returns series.

Prometheus starts once every node's exporter counts steps for both its ranks (``_warm``): it
scrapes a job in step, not its start, whose first slow steps (imports, the rendezvous, one
node started late on a busy machine) can make an equal node look slow for a while; the
committed minute of hold absorbs that, a shorter one would not. With the start left out, the
slow-node alert is held HOLD_S here instead of its committed minute: the test is of the
expression on live exporters, not of Prometheus's clock (the rules' promtool tests,
test_fleet_rules.py, hold it as committed). Under a busy core (`yes` on the other core, five
runs) it fired 22-23 s after Prometheus was ready, 37 s inside FIRES_WITHIN_S, and the test took
54-69 s where the committed hold took 102-107 s.

The server's startup is bounded, and the test says clearly when it could not start."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import jsonschema
import pytest
from promfleet import NODES, node_command, start_node
from promseries import dashboard_queries
from tests_support import free_port, kill_tree, scrape, steps_of, until_or_none

from gputop import schemas

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "gputop-fleet.yml"
PROMETHEUS = shutil.which("prometheus")
JOB, EQUAL = "fleet-test", "fleet-equal"
WORK_MS = {
    (JOB, "node-1"): 40.0, (JOB, "node-2"): 40.0, (JOB, "node-3"): 52.0,
    (EQUAL, "node-4"): 40.0, (EQUAL, "node-5"): 40.0, (EQUAL, "node-6"): 40.0,
}  # fmt: skip
"""Each node's forward time, by training job: node-3 works 30% longer per step than the other
nodes of its job; the second job's nodes are equal (nothing may fire for it)."""
SLOW = (JOB, "node-3")
HOLD_S = 15
"""The slow-node alert's `for:` here (1m as committed)."""
WARM_STEPS = 20
"""Steps each rank has counted before Prometheus starts scraping."""
FIRES_WITHIN_S = 60.0
"""From Prometheus being ready to the alert firing: two scrapes for a rate, and the hold."""
START_S = 60.0

pytestmark = [
    pytest.mark.alone,
    pytest.mark.slow,
    pytest.mark.skipif(
        PROMETHEUS is None,
        reason="the prometheus server is not installed (apt-get install prometheus)",
    ),
]


def _get(url: str, timeout: float = 5.0) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def _nodes(ports: dict[tuple[str, str], int], tmp: Path) -> dict[tuple[str, str], subprocess.Popen]:
    """Each job's three nodes: one DDP group across them (one rendezvous per job)."""
    rendezvous = {job: free_port() for job, _ in ports}
    procs = {}
    for (job, node), port in ports.items():
        index = [n for j, n in ports if j == job].index(node) + 1
        cmd = node_command(port, rendezvous[job], index, NODES, 390,
                           "--work-ms", str(WORK_MS[job, node]))  # fmt: skip
        procs[job, node] = start_node(cmd, tmp / f"{node}.log")
    return procs


def _running(nodes: dict, tmp: Path) -> None:
    """Every node's gputop still runs; else the test fails with the end of its log."""
    for name, job in nodes.items():
        if job.poll() is not None:
            log = (tmp / f"{name[1]}.log").read_text()[-2000:]
            pytest.fail(f"{name}'s gputop exited with {job.returncode}: {log}")


def _warm(ports: dict[tuple[str, str], int], nodes: dict, tmp: Path) -> None:
    """Until every node's exporter counts WARM_STEPS steps for each of its two ranks."""
    counted: list[dict[str, float]] = []

    def warm() -> bool:
        nonlocal counted
        _running(nodes, tmp)
        counted = [steps_of(scrape(port)) for port in ports.values()]
        return all(len(c) == 2 and min(c.values()) >= WARM_STEPS for c in counted)

    # torch and a rendezvous per job, on 2 CPUs
    if until_or_none(warm, timeout=START_S + 60, every=1.0) is None:
        pytest.fail(f"the nodes did not all count {WARM_STEPS} steps per rank: {counted}")


def _rules(tmp: Path) -> Path:
    """The committed rules with the slow-node alert held HOLD_S instead of a minute."""
    text = RULES.read_text()
    alert = text.index("- alert: GputopSlowNode")
    hold = text.index("for: 1m", alert)
    assert hold < text.index("- alert:", alert + 1), "GputopSlowNode has no `for: 1m`"
    rules = tmp / RULES.name
    rules.write_text(text[:hold] + f"for: {HOLD_S}s" + text[hold + len("for: 1m") :])
    return rules


def _prometheus(tmp: Path, targets: dict[tuple[str, str], int], port: int) -> subprocess.Popen:
    assert PROMETHEUS is not None
    config = tmp / "prometheus.yml"
    static = "\n".join(
        f"      - targets: ['127.0.0.1:{p}']\n        labels: {{training_job: {job}}}"
        for (job, _), p in targets.items()
    )
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"rule_files:\n  - {_rules(tmp)}\n"
        f"scrape_configs:\n  - job_name: gputop\n    static_configs:\n{static}\n"
    )
    cmd = [
        PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn",
    ]  # fmt: skip
    with (tmp / "prometheus.log").open("wb") as err:
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)


def _wait_up(url: str, server: subprocess.Popen, log: Path) -> None:
    def ready() -> bool:
        if server.poll() is not None:
            pytest.fail(f"Prometheus exited with {server.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    if until_or_none(ready, timeout=START_S, every=0.5) is None:
        pytest.fail(f"Prometheus did not become ready in {START_S:g} s: {log.read_text()[-2000:]}")


def _fleet_alerts(url: str) -> list[dict]:
    """The fleet rules' alerts, pending or firing."""
    alerts = _get(f"{url}/api/v1/alerts")["data"]["alerts"]
    return [a for a in alerts if a["labels"]["alertname"].startswith(("GputopSlow", "GputopNode"))]


def test_the_slow_node_is_named_by_the_alert_and_listed_first(tmp_path):
    pytest.importorskip("torch")
    ports = {name: free_port() for name in WORK_MS}
    nodes = _nodes(ports, tmp_path)
    prom_port = free_port()
    url = f"http://127.0.0.1:{prom_port}"
    server = None
    try:
        _warm(ports, nodes, tmp_path)
        server = _prometheus(tmp_path, ports, prom_port)
        _wait_up(url, server, tmp_path / "prometheus.log")
        started = time.monotonic()
        slow = f"127.0.0.1:{ports[SLOW]}"

        def fired_alone() -> list[dict]:
            _running(nodes, tmp_path)
            fleet = _fleet_alerts(url)
            others = [
                a for a in fleet
                if (a["labels"]["alertname"], a["labels"]["instance"]) != ("GputopSlowNode", slow)
            ]  # fmt: skip
            # nothing else fires, ever; and once the slow node's fires, nothing else pends
            assert not [a for a in others if a["state"] == "firing"], others
            fired = [a for a in fleet if a["state"] == "firing"]
            if fired:
                assert not others, others  # nothing for the equal job, nothing else for this one
            return fired

        # the verdict on a timeout is the assertion below, with the ratios Prometheus computed
        fired = until_or_none(fired_alone, timeout=FIRES_WITHIN_S, every=1.0) or []
        ratios = _get(f"{url}/api/v1/query?query=gputop:node_work_ratio")["data"]
        assert fired, f"no GputopSlowNode in {FIRES_WITHIN_S:g} s; node work ratios: {ratios}"
        print(f"fired {time.monotonic() - started:.0f} s after Prometheus was ready")
        assert fired[0]["labels"]["training_job"] == JOB
        assert fired[0]["annotations"]["summary"].endswith("(ranks 4, 5)"), fired  # node-3's
        nodes_up = _get(f"{url}/api/v1/query?query=gputop:job_nodes")["data"]["result"]
        assert {r["metric"]["training_job"]: r["value"][1] for r in nodes_up} == {
            JOB: "3",
            EQUAL: "3",
        }  # the equal job was judged, all its nodes reporting

        for expr in dashboard_queries(nodes_row=True):  # the dashboard's nodes row
            promql = expr.replace('"$job"', '".*"')
            answer = _get(f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": promql}))
            assert answer["data"]["result"], f"the dashboard's {expr!r} returns nothing"

        out = subprocess.run(
            [sys.executable, "-m", "gputop", "fleet", "--prometheus", url, "--job", JOB,
             "--once", "--json"],
            capture_output=True, text=True, timeout=60, cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        doc = json.loads(out.stdout)
        jsonschema.validate(doc, schemas.load("fleet"))
        rows = doc["nodes"]
        assert rows[0]["instance"] == f"127.0.0.1:{ports[SLOW]}", rows
        assert rows[0]["slow"] and not any(r["slow"] for r in rows[1:]), rows
        assert len(rows) == 3
        text = subprocess.run(
            [sys.executable, "-m", "gputop", "fleet", "--prometheus", url, "--job", JOB,
             "--once"],
            capture_output=True, text=True, timeout=60, cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )  # fmt: skip
        lines = text.stdout.splitlines()
        print(text.stdout)
        assert text.returncode == 0 and lines[1].startswith("SLOW"), text.stdout + text.stderr
        assert f"127.0.0.1:{ports[SLOW]}" in lines[1]
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
        for job in nodes.values():
            kill_tree(job)
