"""deploy/: the alert rules and the Grafana dashboard, checked with the real promtool against
series scraped from a real gputop (tests/promseries.py records them).

promtool comes from Debian's `prometheus` package (.ci/run installs it when run as root)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from promfleet import FLEET_RULES
from promseries import (
    DASHBOARD,
    INSTANCE,
    RULES,
    SCENARIOS,
    TESTS,
    dashboard_queries,
    promtool_test,
    read_rules,
    record,
    series_of,
)

REPO = Path(__file__).resolve().parents[2]
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool not installed (apt-get install prometheus; .ci/run does it as root)",
)

DCGM_METRICS = {
    # dcgm-exporter's default collectors (etc/default-counters.csv, dcp-metrics-included.csv)
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_PROF_DRAM_ACTIVE",
}
DCGM_LABELS = ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname")
"""The labels dcgm-exporter puts on every GPU series (its README's sample scrape)."""
PROMQL_WORDS = {
    "sum", "max", "min", "count", "avg", "by", "on", "ignoring", "group_left", "group_right",
    "rate", "histogram_quantile", "le", "without", "and", "or", "unless", "bool",
}  # fmt: skip


def promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run(
        [PROMTOOL, *map(str, args)], capture_output=True, text=True, timeout=120, check=False
    )


@needs_promtool
def test_the_rules_pass_promtool_check():
    out = promtool("check", "rules", RULES)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(read_rules())} rules found" in out.stdout


def test_every_alert_names_where_and_what_to_do():
    rules = read_rules()
    assert {r.name for r in rules} >= {
        "GputopJobHung", "GputopStraggler", "GputopDataBound", "GputopRankWaitsForData",
        "GputopGpuPowerThrottled", "GputopGpuThermalThrottled", "GputopRankStuckInPhase",
    }  # fmt: skip
    for r in rules:
        assert r.labels.get("severity") in ("warning", "critical"), r
        assert set(r.annotations) == {"summary", "description"}, r
        assert "{{ $labels.instance }}" in r.annotations["summary"], r


@needs_promtool
def test_the_committed_rule_tests_pass():
    """The tests generated from real scrapes (regenerate: tests/promseries.py)."""
    files = sorted(TESTS.glob("*.yml"))
    assert {f.stem for f in files} == set(SCENARIOS)
    out = promtool("test", "rules", *files)
    assert out.returncode == 0, out.stdout + out.stderr


@needs_promtool
def test_a_rule_that_misses_the_hang_fails_its_test(tmp_path):
    """The rule tests can fail: a hang rule on a bound name gputop never exports stays quiet
    on the recorded hang, and promtool says so."""
    rules = tmp_path / "gputop-alerts.yml"
    rules.write_text(RULES.read_text().replace('bound="hung"', 'bound="hang"'))
    test = tmp_path / "hung.yml"
    test.write_text((TESTS / "hung.yml").read_text().replace("../gputop-alerts.yml", str(rules)))
    out = promtool("test", "rules", test)
    assert out.returncode != 0
    assert "alertname: GputopJobHung" in out.stdout + out.stderr


@pytest.fixture
def log():
    path = Path(tempfile.mkstemp(prefix="gputop-deploy-", suffix=".log")[1])
    yield path
    path.unlink(missing_ok=True)


@needs_promtool
@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    # a job's verdict from its use of the CPU is judged alone (tests/machine_lock.py); a hung
    # job uses none, and waits out the hang's 10 s beside other tests
    [pytest.param(n, marks=() if n == "hung" else pytest.mark.alone) for n in sorted(SCENARIOS)],
)
def test_the_alerts_fire_on_a_live_gputop(name, tmp_path, log):
    """Each scenario recorded now from a real gputop: the alerts it must raise fire with the
    node, rank and GPU named, and no other alert fires (the healthy job raises none)."""
    pytest.importorskip("torch")
    sc = SCENARIOS[name]
    test = tmp_path / f"{name}.yml"
    test.write_text(promtool_test(sc, record(sc, log), str(RULES)))
    out = promtool("test", "rules", test)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]


def _targets() -> list[str]:
    exprs = dashboard_queries(nodes_row=False)
    assert exprs, "no queries in the dashboard"
    return exprs


def _metric_names(expr: str) -> set[str]:
    """Identifiers in an expression that are metric names: not inside {...} or "...", not a
    function or keyword, not a Grafana variable."""
    bare = re.sub(r'"[^"]*"', "", expr)
    bare = re.sub(r"\{[^}]*\}", "", bare)
    bare = re.sub(r"\$\w+", "", bare)
    bare = re.sub(r"\b(by|on|ignoring|group_left|group_right|without)\s*\([^)]*\)", "", bare)
    names = set(re.findall(r"\b[a-zA-Z_:][a-zA-Z0-9_:]*\b", bare))
    return {n for n in names if n not in PROMQL_WORDS and not re.fullmatch(r"\d+\w*", n)}


def _committed_series_names() -> set[str]:
    names = set()
    for f in TESTS.glob("*.yml"):
        names |= set(re.findall(r'series: "(\w+)\{', f.read_text()))
    return names


def _recorded_names() -> set[str]:
    """The series the fleet rules record, and Prometheus' own ALERTS."""
    return set(re.findall(r"- record: ([\w:]+)", FLEET_RULES.read_text())) | {"ALERTS"}


def test_the_dashboard_queries_only_series_gputop_or_dcgm_export():
    exported = _committed_series_names() | _recorded_names()
    assert "gputop_steps_total" in exported and "gputop:node_work_ratio" in exported
    assert dashboard_queries(nodes_row=True), "no nodes row in the dashboard"
    for expr in _targets() + dashboard_queries(nodes_row=True):
        for name in _metric_names(expr):
            assert name in exported or name in DCGM_METRICS, (name, expr)
        if "DCGM_" in expr:  # the join is on labels both exporters have
            for m in re.finditer(r"on\(([^)]*)\)", expr):
                keys = {k.strip() for k in m[1].split(",")}
                assert keys and keys <= {"gpu", "UUID"}, expr


def _grafana_to_promql(expr: str) -> str:
    return (
        expr.replace("$__rate_interval", "1m")
        .replace('"$instance"', '".*"')
        .replace('"$rank"', '".*"')
    )


@needs_promtool
@pytest.mark.slow
def test_every_dashboard_query_returns_series_from_a_live_gputop_and_dcgm(tmp_path, log):
    """Each panel query, run by promtool on series just scraped from a real gputop (a rank on
    GPU 0) plus dcgm-exporter series for the same boards labelled as dcgm-exporter labels them,
    returns something: the names exist and the joins match."""
    pytest.importorskip("torch")
    scrapes = record(DASHBOARD, log)
    gpus = sorted(
        {dict(lab)["gpu"]: dict(lab)["UUID"] for (n, lab), _ in series_of(scrapes).items()
         if n == "gputop_gpu_power_watts"}.items()
    )  # fmt: skip
    assert gpus and all(u.startswith("GPU-") for _, u in gpus)
    rules = tmp_path / "panels.yml"
    lines = ["groups:", "  - name: panels", "    rules:"]
    for i, expr in enumerate(_targets()):
        lines += [
            f"      - alert: Panel{i}",
            f"        expr: count({_grafana_to_promql(expr)}) > 0",
        ]
    rules.write_text("\n".join(lines) + "\n")
    check = promtool("check", "rules", rules)
    assert check.returncode == 0, check.stdout + check.stderr

    text = promtool_test(DASHBOARD, scrapes, str(rules))
    head, _, _ = text.partition("    alert_rule_test:")
    extra = []
    for gpu, uuid in gpus:
        labels = {
            "gpu": gpu, "UUID": uuid, "pci_bus_id": f"00000000:{int(gpu) + 0x18:02X}:00.0",
            "device": f"nvidia{gpu}", "modelName": "NVIDIA H100 80GB HBM3", "Hostname": "node-1",
            "instance": INSTANCE.replace("9401", "9400"), "job": "dcgm",
        }  # fmt: skip
        assert set(DCGM_LABELS) <= set(labels)
        inner = ",".join(f"{k}={json.dumps(v)}" for k, v in labels.items())
        for name in sorted(DCGM_METRICS):
            extra += [
                f"      - series: {json.dumps(f'{name}{{{inner}}}')}",
                '        values: "0.5x900"',
            ]
    checks = ["    alert_rule_test:"]
    for i in range(len(_targets())):
        checks += [
            "      - eval_time: 5m",
            f"        alertname: Panel{i}",
            "        exp_alerts:",
            "          - exp_labels: {}",
        ]
    test = tmp_path / "panels-test.yml"
    test.write_text(head + "\n".join(extra + checks) + "\n")
    out = promtool("test", "rules", test)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]
