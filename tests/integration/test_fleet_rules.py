"""deploy/prometheus/gputop-fleet.yml: the rules across the nodes of one job, checked with the
real promtool on one job of three nodes of two ranks (deploy/prometheus/tests/fleet/: series
recorded from real gputop exporters by tests/promfleet.py, and hand-written ones): a node 30%
slower is named, a node whose ranks wait for data is named, a node stuck outside the collective
is named, and equal nodes raise nothing."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from promfleet import FLEET_SCENARIOS
from promseries import read_rules

REPO = Path(__file__).resolve().parents[2]
FLEET = REPO / "deploy" / "prometheus" / "gputop-fleet.yml"
TESTS = REPO / "deploy" / "prometheus" / "tests" / "fleet"
PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool not installed (apt-get install prometheus; .ci/run does it as root)",
)


def promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run(
        [PROMTOOL, *map(str, args)], capture_output=True, text=True, timeout=120, check=False
    )


def test_the_fleet_rules_pass_promtool_check():
    out = promtool("check", "rules", FLEET)
    assert out.returncode == 0, out.stdout + out.stderr


def test_every_fleet_alert_names_the_node_and_the_job():
    rules = read_rules(FLEET)
    assert {r.name for r in rules} == {"GputopSlowNode", "GputopNodeWaitsForData", "GputopNodeHung"}
    for r in rules:
        assert r.labels.get("severity") in ("warning", "critical"), r
        assert "{{ $labels.instance }}" in r.annotations["summary"], r
        assert "{{ $labels.training_job }}" in r.annotations["summary"], r
        assert "{{ $r.Labels.rank }}" in r.annotations["summary"], r  # and its ranks


def test_the_committed_fleet_tests_pass():
    files = sorted(TESTS.glob("*.yml"))
    assert {f.stem for f in files} == {*FLEET_SCENARIOS, "synthetic"}
    out = promtool("test", "rules", *files)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("recording", ["slow_node", "synthetic"])
def test_a_slow_node_rule_with_a_higher_bar_misses_the_slow_node(tmp_path, recording):
    """The tests can fail: at 1.4 the node 27-30% slower is not named, and promtool says so."""
    rules = tmp_path / "gputop-fleet.yml"
    rules.write_text(FLEET.read_text().replace("node_work_ratio > 1.2", "node_work_ratio > 1.4"))
    test = tmp_path / f"{recording}.yml"
    test.write_text(
        (TESTS / f"{recording}.yml").read_text().replace("../../gputop-fleet.yml", str(rules))
    )
    out = promtool("test", "rules", test)
    assert out.returncode != 0
    assert "alertname: GputopSlowNode" in out.stdout + out.stderr


def test_a_hang_rule_that_ignores_the_collective_misses_the_hung_node(tmp_path):
    """Recorded: node-3's ranks sit in data_wait, every other rank in grad_sync. The rule
    reading a phase gputop never exports names nobody, and promtool says so."""
    rules = tmp_path / "gputop-fleet.yml"
    rules.write_text(FLEET.read_text().replace('{phase!="grad_sync"}) > 120', '{phase="x"}) > 120'))
    test = tmp_path / "node_hung.yml"
    test.write_text(
        (TESTS / "node_hung.yml").read_text().replace("../../gputop-fleet.yml", str(rules))
    )
    out = promtool("test", "rules", test)
    assert out.returncode != 0
    assert "alertname: GputopNodeHung" in out.stdout + out.stderr
