"""Many nodes through a real Prometheus: two training jobs of three simulated nodes each, every
node a `gputop diagnose --prometheus` over a simulated H100 board watching two real ranks of its
job (one DDP group over gloo across the job's three nodes, no gputop code in them); in one job
a node is 30% slower, and the others wait for it in each all-reduce; in the other all are
equal. A real Prometheus server (the same package as promtool)
scrapes them every second with deploy/prometheus/gputop-fleet.yml loaded: the slow-node alert
names that node and `gputop fleet --once --json` lists it first, within two minutes, and
nothing fires (not even pending) for the equal job; every query of the dashboard's nodes row
returns series.

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
from tests_support import free_port, kill_tree

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
FIRES_WITHIN_S = 120.0
"""Prometheus time from the first scrape to the alert (its `for: 1m` included)."""
START_S = 60.0

pytestmark = [
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


def _prometheus(tmp: Path, targets: dict[tuple[str, str], int], port: int) -> subprocess.Popen:
    assert PROMETHEUS is not None
    config = tmp / "prometheus.yml"
    static = "\n".join(
        f"      - targets: ['127.0.0.1:{p}']\n        labels: {{training_job: {job}}}"
        for (job, _), p in targets.items()
    )
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"rule_files:\n  - {RULES}\n"
        f"scrape_configs:\n  - job_name: gputop\n    static_configs:\n{static}\n"
    )
    cmd = [
        PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn",
    ]  # fmt: skip
    with (tmp / "prometheus.log").open("wb") as err:
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)


def _wait_up(url: str, server: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"Prometheus exited with {server.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    pytest.fail(f"Prometheus did not become ready in {START_S:g} s: {log.read_text()[-2000:]}")


def _firing(url: str) -> list[dict]:
    alerts = _get(f"{url}/api/v1/alerts")["data"]["alerts"]
    return [a for a in alerts if a["state"] == "firing"]


def test_the_slow_node_is_named_by_the_alert_and_listed_first(tmp_path):
    pytest.importorskip("torch")
    ports = {name: free_port() for name in WORK_MS}
    nodes = _nodes(ports, tmp_path)
    prom_port = free_port()
    url = f"http://127.0.0.1:{prom_port}"
    server = _prometheus(tmp_path, ports, prom_port)
    try:
        _wait_up(url, server, tmp_path / "prometheus.log")
        started = time.monotonic()
        fired: list[dict] = []
        while time.monotonic() - started < FIRES_WITHIN_S + 60:  # + the nodes' own start
            for name, job in nodes.items():
                if job.poll() is not None:
                    log = (tmp_path / f"{name[1]}.log").read_text()[-2000:]
                    pytest.fail(f"{name}'s gputop exited with {job.returncode}: {log}")
            fired = [a for a in _firing(url) if a["labels"]["alertname"] == "GputopSlowNode"]
            if fired:
                break
            time.sleep(2.0)
        assert fired, (
            f"no GputopSlowNode in {FIRES_WITHIN_S + 60:g} s; node work ratios: "
            + json.dumps(_get(f"{url}/api/v1/query?query=gputop:node_work_ratio")["data"])
        )
        assert {a["labels"]["instance"] for a in fired} == {f"127.0.0.1:{ports[SLOW]}"}
        assert fired[0]["labels"]["training_job"] == JOB
        assert fired[0]["annotations"]["summary"].endswith("(ranks 4, 5)"), fired  # node-3's
        alerts = _get(f"{url}/api/v1/alerts")["data"]["alerts"]  # pending ones too
        fleet = [
            a for a in alerts if a["labels"]["alertname"].startswith(("GputopSlow", "GputopNode"))
        ]
        assert fleet == fired, fleet  # nothing for the equal job, nothing else for this one
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
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
        for job in nodes.values():
            kill_tree(job)
