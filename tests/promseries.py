"""Recorded gputop scrapes -> promtool rule tests (deploy/prometheus/tests/).

The alert rules in deploy/prometheus/ are tested with ``promtool test rules`` on series taken
from a real gputop: ``record`` runs ``gputop diagnose --prometheus`` on a scenario, scrapes
/metrics once a second, and ``promtool_test`` turns the scrapes into ``input_series``.

A recording lasts seconds; the alerts wait minutes (``for:``). So the recorded window is
continued as a steady state: counters and clocks (the open phase's age, how long the verdict has
held) go on at the rate they had over the window, every other gauge keeps its last value. That
is the assumption an alert makes too: the job keeps doing what it was doing.

Regenerate the committed tests (from the repository root, with torch installed)::

    PYTHONPATH=. python tests/promseries.py [SCENARIO...]
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests_support import free_port, kill_tree, scrape, until_or_none

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy" / "prometheus"
RULES = DEPLOY / "gputop-alerts.yml"
TESTS = DEPLOY / "tests"
DASHBOARD_JSON = REPO / "deploy" / "grafana" / "gputop-dcgm.json"
NODES_ROW = "Nodes of one training job"
"""The dashboard row (title prefix) whose panels read the fleet rules' recorded series."""
INSTANCE = "node-1:9401"
"""The ``instance`` Prometheus would add to every series of a node's gputop (and ``job``)."""
JOB = "gputop"
HOLD_S = 900
"""How long the recorded window is continued (15 minutes: past every ``for:`` in the rules)."""
READY_S = 240
"""How long a scenario may take to reach its ``ready`` condition. A verdict's refinement
(data-input to data-input/cpu-transform) needs three stack samples in the dataset's fetch: 4-5 s
in on this machine beside a `yes` loop. Until 2026-11-28 it also needed the main process to use
half a core, which CI's two shared cores once withheld for 150 s and once for over 240 s (the
rule reads the thread's running state now: docs/facts/bounds.md, "data-input/cpu-transform").
The jobs run 330 s: past this and the window."""
CLOCKS = ("gputop_open_phase_age_seconds", "gputop_verdict_held_seconds")
"""Gauges that are clocks: they go on at their recorded rate, like counters, while one reading
of them (one phase left open, one verdict held) spans the window's end (CLOCK_RUN)."""
CLOCK_RUN = 6
"""Scrapes in a row, up to the last, over which a clock must have run at least half as fast as
the wall to be continued: a rank's backward caught open in a few scrapes by chance (a straggler
on a loaded machine) is not a phase that never ends."""

Series = dict[tuple[str, tuple[tuple[str, str], ...]], list[float | None]]


@dataclass(frozen=True)
class Scenario:
    """A job gputop watches, and what the alerts must say about it."""

    name: str
    gputop: tuple[str, ...]
    """``gputop diagnose`` options before ``--``."""
    job: tuple[str, ...]
    """The training command (run from the repository root)."""
    ready: str
    """A condition on a scrape (``ready``) after which the window is recorded."""
    expect: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    """alertname -> the alerts' labels (besides instance and job; values starting with '$'
    name a label of the recorded series, resolved by ``resolve``). Alerts not listed must not
    fire."""
    window_s: int = 12
    env: tuple[tuple[str, str], ...] = ()
    """Extra environment of the job (``LOCAL_RANK`` maps a rank to its GPU)."""


PY = sys.executable
FREE_PORT = "{free_port}"
"""In a job's arguments: a port nothing listens on, chosen when the job starts."""
MLP = ("examples/mlp_train.py", "--steps", "1000000", "--seconds", "330", "--threads", "1")

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "healthy",
            ("--sim-board", "h100x2", "--sim-scenario", "compute"),
            (PY, "tests/corpus/healthy_mlp.py", "--seconds", "330"),
            ready="bound=gpu-compute",
        ),
        Scenario(
            "input_bound_throttled",
            ("--sim-board", "h100x4", "--sim-scenario", "mixed"),
            # 5 ms of CPU work per batch in the training process: the loop waits for its input
            (PY, *MLP, "--slow-transform-ms", "5"),
            ready="bound=data-input/cpu-transform",
            expect={
                "GputopDataBound": [{"bound": "data-input/cpu-transform"}],
                "GputopStepTimeLost": [{"slice": "data"}],
                "GputopRankWaitsForData": [{"rank": "0"}],
                "GputopGpuPowerThrottled": [
                    {"gpu": "2", "UUID": "$UUID:2", "reason": "sw_power_cap"}
                ],
                "GputopGpuThermalThrottled": [
                    {"gpu": "3", "UUID": "$UUID:3", "reason": "sw_thermal"}
                ],
            },
        ),
        Scenario(
            "hung",
            ("--sim-board", "h100x2", "--sim-scenario", "compute"),
            # the loader blocks for good after 300 batches: rank 0 waits in data_wait forever
            (PY, *MLP, "--read-latency-ms", "20", "--loader-stall-after", "300"),
            ready="bound=hung",
            expect={
                "GputopJobHung": [{}],
                "GputopStepTimeLost": [{"slice": "stall"}],
                "GputopRankStuckInPhase": [{"rank": "0", "phase": "data_wait"}],
            },
        ),
        Scenario(
            "straggler",
            ("--sim-board", "h100x2", "--sim-scenario", "compute"),
            (PY, "tests/corpus/spawn_straggler.py", "--seconds", "330", "--port", FREE_PORT),
            ready="bound=straggler",
            expect={
                "GputopStraggler": [{"rank": "1"}],
                "GputopStepTimeLost": [{"slice": "straggler"}],
            },
        ),
    )
}

DASHBOARD = Scenario(
    "dashboard",
    ("--sim-board", "h100x4", "--sim-scenario", "mixed"),
    (PY, *MLP),
    ready="verdict",
    window_s=8,
    env=(("RANK", "0"), ("LOCAL_RANK", "0")),
)
"""A rank on GPU 0 (its agent_info carries the GPU's UUID) for the dashboard's joins, on a
board with a throttled GPU, so every panel has something to show."""


def dashboard_queries(nodes_row: bool) -> list[str]:
    """The dashboard's panel queries: those of the nodes row (the fleet rules' series, a job of
    many nodes: tests/integration/test_fleet.py runs them), or every other (one node's gputop
    and dcgm-exporter)."""
    exprs, row = [], ""
    for panel in json.loads(DASHBOARD_JSON.read_text())["panels"]:
        if panel["type"] == "row":
            row = panel["title"]
        elif row.startswith(NODES_ROW) == nodes_row:
            exprs += [t["expr"] for t in panel.get("targets", [])]
    return exprs


def record(sc: Scenario, log: Path) -> list[dict[str, Any]]:
    """Run the scenario under ``gputop diagnose --prometheus`` and return one scrape per second
    over its window, once ``ready`` holds."""
    port = free_port()
    cmd = [
        PY, "-m", "gputop", "diagnose", "--duration", str(sc.window_s + READY_S + 10),
        "--interval", "0.5", "--prometheus", f"127.0.0.1:{port}",
        "--record", str(log.with_suffix(".gtop")), *sc.gputop, "--",
        *(str(free_port()) if a == FREE_PORT else a for a in sc.job),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "PYTHONPATH": str(REPO), **dict(sc.env)}
    with log.open("wb") as err:
        job = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, cwd=REPO, env=env)
    try:
        _wait_ready(sc, port, job, log)
        scrapes = []
        tick = time.monotonic()
        for _ in range(sc.window_s):
            tick += 1.0
            time.sleep(max(0.0, tick - time.monotonic()))  # pacing: a scrape a second
            fams = scrape(port)
            if fams is None:
                raise RuntimeError(f"gputop stopped answering: {log.read_text()[-2000:]}")
            scrapes.append(fams)
        return scrapes
    finally:
        kill_tree(job)
        log.with_suffix(".gtop").unlink(missing_ok=True)


def _wait_ready(sc: Scenario, port: int, job: subprocess.Popen, log: Path) -> None:
    seen: list[str | None] = []

    def ready() -> bool:
        if job.poll() is not None:
            raise RuntimeError(f"gputop exited with {job.returncode}: {log.read_text()[-2000:]}")
        fams = scrape(port)
        if fams and _ready(sc.ready, fams):
            return True
        bound = _bound(fams) if fams else None
        if not seen or seen[-1] != bound:
            seen.append(bound)
        return False

    if until_or_none(ready, timeout=READY_S, every=0.5):
        return
    job.send_signal(signal.SIGINT)  # gputop closes its recording, which says why
    with contextlib.suppress(subprocess.TimeoutExpired):
        job.wait(timeout=30)
    raise RuntimeError(
        f"{sc.name}: not {sc.ready} within {READY_S} s (verdicts seen: {seen}): "
        f"{log.read_text()[-2000:]}{_evidence(log.with_suffix('.gtop'), seen[-1])}"
    )


def _evidence(recording: Path, bound: str | None) -> str:
    """The summary and evidence of the last verdict ``recording`` holds that named ``bound``:
    which of a rule's conditions a scenario stopped short of."""
    from gputop.record.fileformat import RecordingError
    from gputop.record.reader import open_recording

    last = None
    try:
        for r in open_recording(recording).records():
            p = r.value[1].principal if r.kind == "verdict" else None
            if p is not None and p.bound == bound:
                last = p
    except (OSError, RecordingError) as e:
        return f"\n(the recording could not be read: {e})"
    if last is None:
        return f"\n(the recording holds no verdict naming {bound})"
    lines = [f"{'+' if e.supports else '-'} {e.text} [{e.source}]" for e in last.evidence]
    return f"\nlast {bound}: {last.summary}\n" + "\n".join(lines)


def _bound(fams: dict[str, Any]) -> str | None:
    """The principal bound a scrape's ``gputop_verdict`` says (the state set's 1)."""
    fam = fams.get("gputop_verdict")
    return next((s.labels["bound"] for s in fam.samples if s.value == 1.0), None) if fam else None


def _ready(cond: str, fams: dict[str, Any]) -> bool:
    """``verdict``: a principal bound stands (not warming up, not none); ``bound=X``: it is X."""
    if fams.get("gputop_verdict") is None:
        return False
    current = _bound(fams)
    if cond == "verdict":
        return current not in (None, "warming-up", "none", "stalled")
    return cond == f"bound={current}"


def series_of(
    scrapes: list[dict[str, Any]],
    instance: str = INSTANCE,
    extra: dict[str, str] | None = None,
    names: set[str] | None = None,
) -> Series:
    """(sample name, labels) -> its value in each scrape (None where the series was absent),
    with the ``instance`` and ``job`` labels Prometheus adds and any ``extra`` the scrape
    config sets; only the sample ``names`` given, if any."""
    out: Series = {}
    for i, fams in enumerate(scrapes):
        for fam in fams.values():
            for s in fam.samples:
                if names is not None and s.name not in names:
                    continue
                labels = {**s.labels, "instance": instance, "job": JOB, **(extra or {})}
                key = (s.name, tuple(sorted(labels.items())))
                out.setdefault(key, [None] * len(scrapes))[i] = float(s.value)
    return out


def _num(v: float) -> str:
    """A number promtool's series notation reads: no exponent (``1e+09+0x5`` is ambiguous)."""
    if not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Inf" if v > 0 else "-Inf")
    if v == int(v) and abs(v) < 1e18:
        return str(int(v))
    text = f"{v:.9f}".rstrip("0").rstrip(".")
    return text if text not in ("", "-0") else "0"


def _grows(name: str) -> bool:
    return name.endswith(("_total", "_count", "_sum", "_bucket")) or name in CLOCKS


def values_of(name: str, values: list[float | None], hold: int = HOLD_S) -> str:
    """The recorded values, then ``hold`` more: counters and clocks at their recorded rate
    (while they only went up over the window), other gauges at their last value. A series
    absent from the last scrape ends there."""
    words = ["_" if v is None else _num(v) for v in values]
    if values[-1] is None or not math.isfinite(values[-1]):
        return " ".join(words)  # absent or not a number at the end: nothing to continue
    present = [(i, v) for i, v in enumerate(values) if v is not None]
    (i0, v0), (i1, v1) = present[0], present[-1]
    slope = 0.0
    monotone = all(b >= a for (_, a), (_, b) in itertools.pairwise(present))
    if name in CLOCKS:
        slope = _clock_rate(values)
    elif _grows(name) and monotone and i1 > i0:
        slope = (v1 - v0) / (i1 - i0)
    step = _num(abs(slope))
    sign = "-" if slope < 0 else "+"
    words[-1] = f"{words[-1]}{sign}{step}x{hold}" if step != "0" else f"{words[-1]}x{hold}"
    return " ".join(words)


def _clock_rate(values: list[float | None]) -> float:
    """A clock's rate per scrape over its last CLOCK_RUN scrapes, or 0 (held at its last value)
    when it was absent, went back, or ran under half the wall's rate in any of them."""
    tail = [v for v in values[-CLOCK_RUN:] if v is not None]
    if len(tail) < CLOCK_RUN or any(b - a < 0.5 for a, b in itertools.pairwise(tail)):
        return 0.0
    return (tail[-1] - tail[0]) / (CLOCK_RUN - 1)


def _selector(name: str, labels: tuple[tuple[str, str], ...]) -> str:
    inner = ",".join(f"{k}={_quote(v)}" for k, v in labels)
    return f"{name}{{{inner}}}"


def _quote(v: str) -> str:
    """A double-quoted string for PromQL and YAML alike (both read JSON's escapes)."""
    return json.dumps(v)


@dataclass(frozen=True)
class Rule:
    """An alerting rule as the test needs it: its static labels and annotation templates."""

    name: str
    labels: dict[str, str]
    annotations: dict[str, str]


def read_rules(path: Path = RULES) -> list[Rule]:
    """The alerts of a rules file written as deploy/prometheus/gputop-alerts.yml is: each
    ``- alert:`` then ``labels:`` and ``annotations:`` blocks of ``key: "value"`` lines (the
    values double-quoted, read as JSON). promtool checks the file itself; this only reads what
    the expected alerts need, and a misreading makes ``promtool test rules`` fail, not pass."""
    rules: list[Rule] = []
    block: dict[str, str] | None = None
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if m := re.fullmatch(r"- alert: (\w+)", stripped):
            rules.append(Rule(m[1], {}, {}))
            block = None
        elif stripped in ("labels:", "annotations:") and rules:
            block = rules[-1].labels if stripped == "labels:" else rules[-1].annotations
        elif block is not None and (m := re.fullmatch(r"(\w+): (.+)", stripped)):
            block[m[1]] = json.loads(m[2]) if m[2].startswith('"') else m[2]
        elif re.fullmatch(r"\w+:.*", stripped):
            block = None  # expr:, for:, ... end a block
    return rules


def render(template: str, labels: dict[str, str]) -> str:
    """An annotation as Prometheus renders it, for templates that use only {{ $labels.x }}."""
    if re.search(r"{{(?!\s*\$labels\.\w+\s*}})", template):
        raise ValueError(
            f"annotation uses more than $labels (the test cannot render it): {template}"
        )
    return re.sub(r"{{\s*\$labels\.(\w+)\s*}}", lambda m: labels.get(m[1], ""), template)


def resolve(expected: dict[str, str], scrapes: list[dict[str, Any]]) -> dict[str, str]:
    """Expected labels with ``$UUID:N`` replaced by GPU N's UUID as the last scrape gave it."""
    uuids = {
        s.labels["gpu"]: s.labels["UUID"] for s in samples(scrapes[-1], "gputop_gpu_power_watts")
    }
    return {
        k: uuids[v[len("$UUID:") :]] if v.startswith("$UUID:") else v for k, v in expected.items()
    }


def samples(fams: dict[str, Any], name: str) -> list[Any]:
    """A scrape's samples named ``name`` (a counter's family is named without ``_total``)."""
    return [s for fam in fams.values() for s in fam.samples if s.name == name]


def promtool_test(sc: Scenario, scrapes: list[dict[str, Any]], rules_file: str) -> str:
    """A promtool rule-test file: the recorded series (continued, ``values_of``) and, for every
    alert in the rules, the alerts expected 15 minutes in (none unless the scenario lists it)."""
    out = [
        f"# Generated by tests/promseries.py from a real gputop scrape ({sc.name}):",
        f"#   gputop diagnose {' '.join(sc.gputop)} -- {' '.join(_shown(sc.job))}",
        f"# {len(scrapes)} scrapes 1 s apart, then held steady for {HOLD_S} s.",
        *input_lines(sc.name, rules_file, series_of(scrapes)),
    ]
    out.append("    alert_rule_test:")
    for rule in read_rules():
        out += [f"      - eval_time: {HOLD_S}s", f"        alertname: {rule.name}"]
        alerts = sc.expect.get(rule.name, [])
        if not alerts:
            out.append("        exp_alerts: []")
            continue
        out.append("        exp_alerts:")
        for want in alerts:
            labels = {"instance": INSTANCE, **resolve(want, scrapes)}
            if rule.name == "GputopStraggler":
                labels["job"] = JOB  # a plain comparison keeps every label of the series
            shown = {**labels, **rule.labels}
            notes = {k: render(v, labels) for k, v in rule.annotations.items()}
            out.append(f"          - exp_labels: {flow(shown)}")
            out.append(f"            exp_annotations: {flow(notes)}")
    return "\n".join(out) + "\n"


def input_lines(name: str, rules_file: str, series: Series) -> list[str]:
    """A promtool test file's rules, one test named ``name`` and its input series (each
    continued past the recording, ``values_of``); its ``alert_rule_test`` follows."""
    out = [
        "rule_files:",
        f"  - {rules_file}",
        "evaluation_interval: 15s",
        "tests:",
        f"  - name: {name}",
        "    interval: 1s",
        "    input_series:",
    ]
    for (metric, labels), values in sorted(series.items()):
        out.append(f"      - series: {_quote(_selector(metric, labels))}")
        out.append(f"        values: {_quote(values_of(metric, values))}")
    return out


def flow(d: dict[str, str]) -> str:
    return "{" + ", ".join(f"{k}: {_quote(v)}" for k, v in sorted(d.items())) + "}"


def _shown(cmd: tuple[str, ...]) -> list[str]:
    return ["python" if c == PY else c for c in cmd]


def main() -> None:
    """Record every scenario and write deploy/prometheus/tests/<name>.yml."""
    import tempfile

    TESTS.mkdir(parents=True, exist_ok=True)
    names = sys.argv[1:] or list(SCENARIOS)
    for sc in (SCENARIOS[n] for n in names):
        log = Path(tempfile.mkstemp(prefix="gputop-promseries-", suffix=".log")[1])
        try:
            text = promtool_test(sc, record(sc, log), "../gputop-alerts.yml")
        finally:
            log.unlink(missing_ok=True)
        (TESTS / f"{sc.name}.yml").write_text(text)
        print(f"wrote {TESTS / sc.name}.yml")


if __name__ == "__main__":
    main()
