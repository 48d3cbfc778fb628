"""`gputop report` over a recording of known content: three minutes through the Recorder with
two GPUs (one power-capped for a known minute), two ranks of known step times, phases and
FLOPs, verdict changes at known times, a capture and the target's exit. The numbers come out
as put in (histogram medians within their 2 % buckets), the JSON validates against
gputop/schemas/report.schema.json, the text has every section, and a recording cut after its last
summary still reports its last minutes."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import MappingProxyType as M
from typing import Any

import jsonschema
import pytest
from builders import agent, device
from tests_support import schema_object

from gputop import schemas
from gputop.diagnose.findings import Evidence, Finding, Saving, Verdict
from gputop.diagnose.point import EvalPoint
from gputop.model.gpu import GpuSample
from gputop.model.host import HostSample
from gputop.model.step_stats import PEAK_DENSE
from gputop.model.steps import AgentsSample, AgentState, StepRecord
from gputop.record.fileformat import SUMMARY, Scan, frames
from gputop.record.reader import open_recording
from gputop.record.report import build_report, render_report
from gputop.record.writer import Recorder

REPO = Path(__file__).resolve().parents[3]
SCHEMA = schemas.load("report")
MS = 1_000_000
T0 = 1000.0
SECONDS = 180
"""Readings at T0, T0 + 1, ..., T0 + 179."""
PID = 2024
MFU = 0.4
BF16_PEAK = PEAK_DENSE["H100 SXM"]["bf16"]
RANK0_MS = (90, 100, 100, 110, 150)
"""Rank 0's step times, in turn: median 100 ms, p90 150 ms, mean 110 ms."""
RANK0_PHASES = {"data_wait": 0.2, "forward": 0.3, "backward": 0.4, "optimizer": 0.1}
CAPPED = range(31, 91)
"""The readings at which GPU 0 reports sw_power_cap: 60 s of it (each counts the second
since the reading before)."""


def finding(bound: str, conf: float) -> Finding:
    saving = Saving(0.2, 1.25, "if the cap were lifted")
    return Finding(
        bound, True, conf, f"{bound}: the summary",
        (Evidence(f"{bound} evidence", "NVML"), Evidence("against it", "agent", supports=False)),
        (f"{bound} lever",),
        lever_savings=(saving,) if bound == "throttled-power" else (),
    )  # fmt: skip


def verdict(k: int) -> Verdict:
    """None for 3 s, data-loading until 60 s, throttled-power after."""
    if k < 3:
        return Verdict(None, (), (), None, "not enough data yet: 3 s of 10 s", ("NVML",))
    p = finding("data-loading", 0.7) if k < 60 else finding("throttled-power", 0.45)
    return Verdict(p, (), (p,), T0 + (3 if k < 60 else 60), "", ("NVML", "agent"))


def rank0_step(n: int, t0_ns: int) -> StepRecord:
    dur = RANK0_MS[n % len(RANK0_MS)] * MS
    phases = M({k: round(dur * share) for k, share in RANK0_PHASES.items()})
    flops = dur / 1e9 * BF16_PEAK * MFU
    return StepRecord(n, t0_ns, dur, phases, samples=64, flops=flops)


def rank1_step(n: int, t0_ns: int) -> StepRecord:
    # 250 ms, 50 of them in no phase
    return StepRecord(n, t0_ns, 250 * MS, M({"forward": 100 * MS, "backward": 100 * MS}),
                      tokens=4096)  # fmt: skip


def rank_agent(pid: int, rank: int, steps: tuple[StepRecord, ...], fingerprint: dict) -> AgentState:
    """One of the two ranks, between steps."""
    return agent(pid, steps, rank, world_size=2, fingerprint=M(fingerprint), open_phase=None,
                 open_age_s=None, since_step_s=0.01)  # fmt: skip


def record(path: Path) -> None:
    clock = [T0]
    rec = Recorder(path, clock=lambda: clock[0])
    session = {"mode": "diagnose", "pid": PID, "simulated": "h100x2",
               "command": ["python", "train.py"], "interval": 1.0}  # fmt: skip
    rec.start((device(0), device(1)), session)
    done: dict[int, list[StepRecord]] = {0: [], 1: []}
    next_ns = {0: 10**18, 1: 10**18}
    for k in range(SECONDS):
        now = T0 + k
        clock[0] = now
        rec.verdict(EvalPoint(now), verdict(k))
        rec.gpu([
            GpuSample(0, now, 1.7e9 + now, power_w=650.0, util_gpu_pct=90, sm_active_pct=80.0,
                      temp_c=70 + k % 5, reasons=("sw_power_cap",) if k in CAPPED else ()),
            GpuSample(1, now, 1.7e9 + now, power_w=300.0, util_gpu_pct=50, temp_c=60,
                      na=M({"sm_active_pct": "not supported"})),
        ])  # fmt: skip
        for rank, per_s, make in ((0, 10, rank0_step), (1, 4, rank1_step)):
            for _ in range(per_s):
                s = make(len(done[rank]), next_ns[rank])
                next_ns[rank] += s.dur_ns
                done[rank].append(s)
        fingerprints = ({"autocast": True, "autocast_dtype": "bfloat16"}, {})
        # readings repeat the agent's last steps (hundreds, as its ring does): more than a
        # 10-s interval's, so a reader going on from a summary finds the open interval's steps
        agents = tuple(
            rank_agent(100 + r, r, tuple(done[r][-120:]), fingerprints[r]) for r in (0, 1)
        )
        rec.agents(AgentsSample(PID, now, 1.7e9 + now, agents))
        if k == 100:
            rec.event(now, 1.7e9 + now, "capture",
                      {"kind": "pyspy-flame", "pid": PID, "status": "running"})  # fmt: skip
        if k == 105:
            data = {"kind": "pyspy-flame", "pid": PID, "status": "done",
                    "folder": "/tmp/gputop/captures/x", "reason": "verdict changed"}  # fmt: skip
            rec.event(now, 1.7e9 + now, "capture", data)
        if k == SECONDS - 1:
            rec.host(HostSample(PID, now, 1.7e9 + now, "exited", 3, (), None, "none", None,
                                None, M({})))  # fmt: skip
    rec.close()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("report") / "session.gputop"
    record(path)
    return path


@pytest.fixture(scope="module")
def doc(recorded) -> dict[str, Any]:
    return build_report(open_recording(recorded))


def close(a: float | None, b: float, rel: float) -> bool:
    return a is not None and math.isclose(a, b, rel_tol=rel)


# ---- numbers ----


def test_the_recording_part_says_what_was_recorded(doc, recorded):
    r = doc["recording"]
    assert doc["schema"] == "gputop.report" and doc["schema_version"] == 1
    assert r["path"] == str(recorded)
    assert r["duration_s"] == SECONDS - 1
    assert r["mode"] == "diagnose" and r["pid"] == PID and r["simulated"] == "h100x2"
    assert r["command"] == ["python", "train.py"]
    assert r["gpus"] == ["NVIDIA H100 80GB HBM3"] * 2
    assert r["damage"] is None
    assert r["started"] is not None and r["started"].endswith("Z")


def test_time_per_verdict_and_its_changes(doc):
    seconds = {v["bound"]: v["seconds"] for v in doc["verdicts"]}
    assert seconds == {"throttled-power": 119.0, "data-loading": 57.0, "none": 3.0}
    assert [v["bound"] for v in doc["verdicts"]] == ["throttled-power", "data-loading", "none"]
    shares = {v["bound"]: v["share"] for v in doc["verdicts"]}
    assert shares["throttled-power"] == round(119 / 179, 4)
    assert math.isclose(sum(shares.values()), 1.0, abs_tol=1e-3)
    assert [(e["t_s"], e["bound"]) for e in doc["timeline"]] == [
        (0.0, None),
        (3.0, "data-loading"),
        (60.0, "throttled-power"),
    ]
    assert doc["timeline"][0]["note"].startswith("not enough data yet")
    assert doc["timeline"][2]["confidence"] == 0.45


def test_steps_per_rank(doc):
    r0, r1 = doc["ranks"]
    assert (r0["rank"], r1["rank"]) == (0, 1)
    assert r0["steps"] == 10 * SECONDS and r1["steps"] == 4 * SECONDS
    assert close(r0["step_s_median"], 0.100, 0.02)
    assert close(r0["step_s_p90"], 0.150, 0.02)
    assert close(r1["step_s_median"], 0.250, 0.02) and close(r1["step_s_p90"], 0.250, 0.02)
    mean0 = sum(RANK0_MS) / len(RANK0_MS) / 1e3
    assert r0["steps_per_s"] == round(1 / mean0, 3)
    assert r0["samples_per_s"] == round(64 / mean0, 1) and r0["tokens_per_s"] is None
    assert r1["tokens_per_s"] == round(4096 / 0.25, 1) and r1["samples_per_s"] is None
    assert r0["phases"] == RANK0_PHASES  # shares of step time, largest first
    assert list(r0["phases"]) == ["backward", "forward", "data_wait", "optimizer"]
    assert r1["phases"] == {"forward": 0.4, "backward": 0.4, "unmarked": 0.2}


def test_mfu_from_flops_fingerprint_and_the_board(doc):
    r0, r1 = doc["ranks"]
    m = r0["mfu"]
    assert m["value"] == pytest.approx(MFU, abs=1e-3)
    assert m["board"] == "H100 SXM" and m["precision"] == "bf16"
    assert m["precision_assumed"] is False and m["precision_basis"] == "autocast bfloat16"
    assert m["peak_flops"] == BF16_PEAK and m["note"] is None
    assert r1["mfu"] is None  # no FLOPs reported


def test_gpus_and_throttle_seconds(doc):
    g0, g1 = doc["gpus"]
    assert g0 == {"gpu": 0, "readings": SECONDS, "util_pct_mean": 90.0,
                  "sm_active_pct_mean": 80.0, "power_w_mean": 650.0, "temp_c_max": 74}  # fmt: skip
    assert g1["sm_active_pct_mean"] is None and g1["util_pct_mean"] == 50.0
    assert doc["throttle"] == [
        {"reason": "sw_power_cap", "seconds": float(len(CAPPED)),
         "share": round(len(CAPPED) / (SECONDS - 1), 4), "gpus": 1}
    ]  # fmt: skip


def test_findings_captures_exits_and_series(doc):
    bounds = [(f["bound"], f["seconds"]) for f in doc["findings"]]
    assert bounds == [("throttled-power", 119.0), ("data-loading", 57.0)]
    tp = doc["findings"][0]
    assert tp["levers"] == ["throttled-power lever"]
    assert tp["savings"] == ["~1.2x steps/s if the cap were lifted"]
    assert doc["findings"][1]["savings"] == [None]  # none recorded
    assert [e["supports"] for e in tp["evidence"]] == [True, False]
    assert doc["captures"] == [
        {"t_s": 105.0, "kind": "pyspy-flame", "pid": PID, "status": "done",
         "folder": "/tmp/gputop/captures/x", "reason": "verdict changed"}
    ]  # fmt: skip
    assert doc["exits"] == [{"t_s": float(SECONDS - 1), "pid": PID, "exit_code": 3}]
    series = doc["series"]
    assert [p["t_s"] for p in series] == [10.0 * i for i in range(18)]
    assert all(p["gpu_pct"] == pytest.approx((80 + 50) / 2) for p in series)
    assert all(close(p["step_s"], sum(RANK0_MS) / len(RANK0_MS) / 1e3, 0.05) for p in series)
    assert series[2]["verdict"] == "data-loading" and series[-1]["verdict"] == "throttled-power"


# ---- the JSON and the text ----


def test_the_document_validates_against_its_schema(doc):
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    jsonschema.validate(json.loads(json.dumps(doc)), SCHEMA)


def test_the_schema_lists_every_field_the_report_emits(doc):
    """New fields go into the schema too: every key of the document is described."""

    def keys(value: Any, schema: dict[str, Any], where: str) -> None:
        if isinstance(value, dict) and "properties" in schema:
            for k, v in value.items():
                assert k in schema["properties"], f"{where}.{k} is not in the schema"
                keys(v, resolve(schema["properties"][k]), f"{where}.{k}")
        elif isinstance(value, list) and isinstance(schema.get("items"), dict):
            for v in value:
                keys(v, resolve(schema["items"]), f"{where}[]")

    def resolve(s: dict[str, Any]) -> dict[str, Any]:
        return schema_object(SCHEMA, s)

    keys(doc, SCHEMA, "report")


def test_the_text_has_every_section(doc):
    text = render_report(doc)
    for section in ("Time per verdict", "Verdict changes", "Steps per rank",
                    "Phase breakdown (rank 0)", "MFU 40.0% of H100 SXM bf16", "GPUs",
                    "Clock-event reasons", "sw_power_cap", "Findings", "Captures",
                    "the target (pid 2024) exited at 179.0 s, status 3",
                    "step time (ms, mean per 10 s, rank 0)", "GPU activity",
                    "verdict over time"):  # fmt: skip
        assert section in text, section
    assert "2 x NVIDIA H100 80GB HBM3 (SIMULATED: h100x2)" in text
    assert "python train.py on" in text
    assert "note: the file" not in text
    assert "step time" not in render_report(doc, charts=False)


# ---- a recording that did not end cleanly ----


def _summary_offsets(path: Path) -> list[int]:
    with path.open("rb") as f:
        return [fr.offset for fr in frames(f, str(path), Scan(), skip_data=True)
                if fr.kind == SUMMARY]  # fmt: skip


def test_a_recording_cut_before_its_last_summary_reports_the_same(recorded, doc, tmp_path):
    offsets = _summary_offsets(recorded)
    assert len(offsets) >= 3  # a minute's summaries and the one close() writes
    cut = tmp_path / "cut.gputop"
    cut.write_bytes(recorded.read_bytes()[: offsets[-1]])  # killed before writing it
    recording = open_recording(cut)
    again = build_report(recording)
    assert recording.damage is None  # it ends on a frame boundary
    assert again["recording"].pop("path") == str(cut)
    want = json.loads(json.dumps(doc))
    want["recording"].pop("path")
    assert json.loads(json.dumps(again)) == want


def test_a_recording_cut_inside_its_last_minutes_reports_them_from_the_records(
    recorded, doc, tmp_path
):
    data = recorded.read_bytes()
    offsets = _summary_offsets(recorded)
    # inside the data frames after the second-to-last summary (the recorder was killed)
    cut_at = offsets[-2] + (offsets[-1] - offsets[-2]) * 2 // 3
    cut = tmp_path / "cut.gputop"
    cut.write_bytes(data[:cut_at])
    recording = open_recording(cut)
    part = build_report(recording)
    assert "ends inside a frame" in part["recording"]["damage"]
    full_s = doc["recording"]["duration_s"]
    assert 120 < part["recording"]["duration_s"] < full_s
    tail = part["recording"]["duration_s"]
    seconds = {v["bound"]: v["seconds"] for v in part["verdicts"]}
    assert seconds["throttled-power"] == tail - 60 and seconds["data-loading"] == 57.0
    r0 = part["ranks"][0]
    # the readings up to the cut (its last second's steps may be in the frame cut off)
    assert r0["steps"] in (10 * int(tail), 10 * (int(tail) + 1))
    assert close(r0["step_s_median"], 0.100, 0.02)
    assert part["ranks"][0]["mfu"]["value"] == pytest.approx(MFU, abs=1e-3)
    assert part["series"][-1]["t_s"] == 10.0 * (int(tail) // 10)
    text = render_report(part)
    assert "note: the file ends inside a frame" in text
    jsonschema.validate(json.loads(json.dumps(part)), SCHEMA)


def test_a_bound_that_led_only_at_the_last_evaluation_led_0_s_not_minus_0(tmp_path):
    clock = [T0]
    rec = Recorder(tmp_path / "f", clock=lambda: clock[0])
    rec.start((device(0),), {"mode": "record"})
    for k, bound in enumerate(("data-loading", "data-loading", "throttled-power")):
        clock[0] = T0 + k
        p = finding(bound, 0.7)
        rec.verdict(EvalPoint(T0 + k), Verdict(p, (), (p,), T0, "", ("NVML",)))
    rec.close()
    doc = build_report(open_recording(tmp_path / "f"))
    last = next(f for f in doc["findings"] if f["bound"] == "throttled-power")
    assert last["seconds"] == 0.0 and math.copysign(1.0, last["seconds"]) == 1.0
    text = render_report(doc, charts=False)
    assert "throttled-power (70%, led 0 s)" in text and "-0 s" not in text
    assert [v["bound"] for v in doc["verdicts"]] == ["data-loading"]
    jsonschema.validate(doc, SCHEMA)


@pytest.mark.parametrize("crafted", [
    None, "x", [1], [{"speedup": "2", "condition": "c"}], [{"speedup": True, "condition": "c"}],
    [{"speedup": 0.5, "condition": "c"}], [{"speedup": float("nan"), "condition": "c"}],
    [{"speedup": 2.0, "condition": 7}], [{"speedup": 2.0}],
])  # fmt: skip
def test_a_crafted_saving_reads_as_none(crafted):
    from gputop.record.report import _savings

    assert _savings({"levers": ["a"], "lever_savings": crafted}) == [None]


def test_a_finding_only_shown_beside_the_principal_keeps_its_cause_and_ranged_saving(tmp_path):
    """The straggler led; comms was shown beside it with its own cause and a sized lever: the
    report (text, HTML's data and the schema) says both, the second as beside the principal."""
    from gputop.diagnose.findings import Cause
    from gputop.render.report_page import build_page

    clock = [T0]
    rec = Recorder(tmp_path / "f", clock=lambda: clock[0])
    rec.start((device(0),), {"mode": "record"})
    lead = finding("straggler", 0.8)
    sized = Saving(0.2, 1.25, "if the buckets overlapped", 0.1, 0.3)
    beside = Finding("comms", True, 0.6, "comms: the summary", (), ("bigger buckets",),
                     cause=Cause("DDP all-reduces 90 MB a step, 40 ms exposed"),
                     lever_savings=(sized,))  # fmt: skip
    for k in range(3):
        clock[0] = T0 + k
        rec.verdict(EvalPoint(T0 + k), Verdict(lead, (beside,), (lead, beside), T0, "", ()))
    rec.close()
    doc = build_report(open_recording(tmp_path / "f"))
    got = next(f for f in doc["findings"] if f["bound"] == "comms")
    assert got["beside"] is True and got["seconds"] == 0.0
    assert got["cause"] == "DDP all-reduces 90 MB a step, 40 ms exposed"
    assert got["savings"] == ["~1.2x steps/s (saves 10-30% of a step) if the buckets overlapped"]
    text = render_report(doc, charts=False)
    assert "comms (60%, beside the principal): comms: the summary" in text
    assert "    why: DDP all-reduces 90 MB a step, 40 ms exposed" in text
    assert "beside the principal" in build_page(doc, None)
    jsonschema.validate(doc, SCHEMA)
