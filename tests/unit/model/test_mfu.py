"""MFU: the peak table and its board-name matching, the training precision from the agent's
fingerprint, and MFU over synthetic step records (signals, the step pane, the diagnose JSON)."""

from __future__ import annotations

import json
from types import MappingProxyType as M

import pytest
from rich.style import Style

from gputop import schemas
from gputop.diagnose.signals.steps import step_signals
from gputop.headless import Diagnosis, document, render
from gputop.model.step_stats import (
    PEAK_DENSE,
    PRECISIONS,
    board_of,
    mfu_of,
    peak_flops,
    training_precision,
)
from gputop.model.steps import AgentsSample, AgentState, StepRecord
from gputop.ui.panes.steps import step_lines

T = 1e12
HIGHEST = {"autocast": False, "float32_matmul_precision": "highest"}


@pytest.mark.parametrize(
    ("name", "board"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 SXM5 80GB", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 80GB HBM2e", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA H200 NVL", "H200 NVL"),
        ("NVIDIA GH200 480GB", "GH200"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA A100-SXM4-40GB", "A100"),
        ("NVIDIA A100-PCIE-40GB", "A100"),
        ("NVIDIA A100 80GB PCIe", "A100"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA A10", "A10"),
        ("Tesla T4", "T4"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA GB200", "GB200"),
        # whole words only: none of these is the board its name contains
        ("NVIDIA A10G", None),
        ("NVIDIA L40", None),
        ("NVIDIA H800", None),
        ("NVIDIA H20", None),
        # an H100 that names no form factor: SXM, PCIe and NVL peaks differ
        ("NVIDIA H100", None),
        ("NVIDIA GeForce RTX 4090", None),
        ("", None),
        (None, None),
    ],
)
def test_board_names_match_the_most_specific_row(name, board):
    assert board_of(name) == board


def test_peaks_per_precision_are_the_datasheet_dense_figures():
    assert peak_flops("NVIDIA H100 80GB HBM3") == pytest.approx(989.5 * T)
    assert peak_flops("NVIDIA H100 80GB HBM3", "tf32") == pytest.approx(494.5 * T)
    assert peak_flops("NVIDIA H100 80GB HBM3", "fp32") == pytest.approx(67 * T)
    assert peak_flops("NVIDIA H100 PCIe") == pytest.approx(756.5 * T)
    assert peak_flops("NVIDIA H100 NVL") == pytest.approx(835.5 * T)
    assert peak_flops("NVIDIA A100-SXM4-80GB") == peak_flops("NVIDIA A100-PCIE-40GB") == 312 * T
    assert peak_flops("NVIDIA A100-SXM4-80GB", "tf32") == 156 * T
    assert peak_flops("NVIDIA L40S") == pytest.approx(362.05 * T)
    assert peak_flops("NVIDIA L4", "fp16") == pytest.approx(121 * T)
    assert peak_flops("NVIDIA A10", "tf32") == pytest.approx(62.5 * T)
    assert peak_flops("NVIDIA B200") == pytest.approx(2250 * T)
    # Turing: fp16 tensor cores only, no bf16 and no TF32: no number is invented
    assert peak_flops("Tesla T4", "fp16") == 65 * T
    assert peak_flops("Tesla T4", "bf16") is None and peak_flops("Tesla T4", "tf32") is None
    assert peak_flops("NVIDIA L40") is None


def test_every_row_is_dense_and_ordered_sensibly():
    for board, peaks in PEAK_DENSE.items():
        assert set(peaks) == set(PRECISIONS), board
        fp32 = peaks["fp32"]
        assert fp32 is not None and 1 * T < fp32 < 200 * T, board
        for p in ("bf16", "fp16", "tf32"):
            v = peaks[p]
            assert v is None or fp32 < v < 3000 * T, (board, p)
        if peaks["tf32"] is not None and peaks["bf16"] is not None:
            assert peaks["tf32"] == pytest.approx(peaks["bf16"] / 2, rel=0.03), board


@pytest.mark.parametrize(
    ("fp", "precision"),
    [
        ({"autocast": True, "autocast_dtype": "bfloat16"}, "bf16"),
        ({"autocast": True, "autocast_dtype": "float16"}, "fp16"),
        ({"autocast": True, "autocast_dtype": "float16", "param_dtype": "bfloat16"}, "fp16"),
        ({"autocast": False, "float32_matmul_precision": "high"}, "tf32"),
        ({"autocast": False, "float32_matmul_precision": "medium"}, "tf32"),
        (HIGHEST, "fp32"),
        ({**HIGHEST, "param_dtype": "float32"}, "fp32"),
        # pure bf16 training: no autocast, bf16 weights
        ({**HIGHEST, "param_dtype": "bfloat16"}, "bf16"),
        # the agent did not say
        ({}, None),
        ({"autocast": None, "float32_matmul_precision": "high"}, None),
        ({"autocast": True}, None),
        ({"autocast": False}, None),
        # untrusted values from the socket
        ({"autocast": "yes", "autocast_dtype": "bfloat16"}, None),
        ({"autocast": 1, "autocast_dtype": "bfloat16"}, None),
        ({"autocast": True, "autocast_dtype": M({"x": 1})}, None),
        ({"autocast": False, "float32_matmul_precision": ["high"]}, None),
        ({"autocast": False, "float32_matmul_precision": "HIGH"}, None),
    ],
)
def test_training_precision_from_the_fingerprint(fp, precision):
    got, basis = training_precision(M(fp))
    assert got == precision
    assert basis


def test_precision_from_a_decoded_fingerprint_message():
    from gputop.sources.agent_decode import parse_fingerprint

    fp = parse_fingerprint({"config": {"autocast": True, "autocast_dtype": "float16",
                                       "param_dtype": "float32"}})  # fmt: skip
    assert fp is not None and training_precision(fp) == ("fp16", "autocast float16")
    hostile = parse_fingerprint({"config": {"autocast": False, "param_dtype": {"x": "bfloat16"},
                                            "float32_matmul_precision": "h" * 200}})  # fmt: skip
    assert hostile is not None and training_precision(hostile)[0] is None


def steps(n: int = 10, dur_ms: float = 100.0, flops: float | None = 50e12) -> list[StepRecord]:
    return [
        StepRecord(i, int(i * dur_ms * 1e6), int(dur_ms * 1e6), M({"forward": 1}), flops=flops)
        for i in range(n)
    ]


BF16 = M({"autocast": True, "autocast_dtype": "bfloat16"})


def test_mfu_is_model_flops_per_second_over_the_peak_of_the_training_precision():
    # 50 TFLOP in 0.1 s = 500 TFLOP/s
    m = mfu_of(steps(), ["NVIDIA H100 80GB HBM3"], BF16)
    assert m.value == pytest.approx(500 / 989.5)
    assert (m.precision, m.board, m.precision_assumed, m.note) == ("bf16", "H100 SXM", False, None)
    assert m.peak_flops == pytest.approx(989.5 * T) and m.precision_basis == "autocast bfloat16"
    tf32 = mfu_of(steps(), ["NVIDIA H100 80GB HBM3"], M({"autocast": False,
                  "float32_matmul_precision": "high"}))  # fmt: skip
    assert tf32.precision == "tf32" and tf32.value == pytest.approx(500 / 494.5)
    assert "over the tf32 peak" in (tf32.note or "")  # > 100 %: said, not hidden
    fp32 = mfu_of(steps(flops=5e12), ["NVIDIA A100-SXM4-40GB"], M({"autocast": False,
                  "float32_matmul_precision": "highest"}))  # fmt: skip
    assert fp32.precision == "fp32" and fp32.value == pytest.approx(50 / 19.5)


def test_mfu_with_unknown_precision_assumes_bf16_and_says_so():
    m = mfu_of(steps(), ["NVIDIA A100-SXM4-80GB"], M({}))
    assert m.value == pytest.approx(500 / 312) and m.precision == "bf16" and m.precision_assumed
    assert m.note and "precision unknown" in m.note and "assuming bf16" in m.note


def test_mfu_is_not_computed_without_flops_or_a_known_board():
    no_flops = mfu_of(steps(flops=None), ["NVIDIA H100 80GB HBM3"], BF16)
    assert no_flops.value is None and no_flops.note and "no FLOPs reported" in no_flops.note
    unknown = mfu_of(steps(), ["NVIDIA A10G"], BF16)
    assert unknown.value is None and unknown.board is None and unknown.peak_flops is None
    assert unknown.note == "board unknown: no peak for NVIDIA A10G"
    assert mfu_of(steps(), [], BF16).note == "board unknown: no GPU name"
    t4 = mfu_of(steps(), ["Tesla T4"], BF16)
    assert t4.value is None and t4.note == "T4 has no bf16 peak"
    t4_fp16 = mfu_of(steps(flops=6.5e12), ["Tesla T4"], M({"autocast": True,
                     "autocast_dtype": "float16"}))  # fmt: skip
    assert t4_fp16.value == pytest.approx(1.0)
    # TF32 asked for on a board without it: its fp32 matmuls run in fp32
    t4_tf32 = mfu_of(steps(flops=0.405e12), ["Tesla T4"], M({"autocast": False,
                     "float32_matmul_precision": "high"}))  # fmt: skip
    assert t4_tf32.precision == "fp32" and t4_tf32.value == pytest.approx(0.5)
    assert "T4 has no TF32" in t4_tf32.precision_basis


def test_mfu_takes_the_first_known_board_and_the_steps_that_report_flops():
    mixed = steps(5, flops=None) + steps(5)  # the FLOP probe measured a step midway
    m = mfu_of(mixed, ["NVIDIA GeForce RTX 4090", "NVIDIA L40S"], BF16)
    assert m.board == "L40S" and m.value == pytest.approx(500 / 362.05)


def agents(fp, flops: float | None = 50e12) -> AgentsSample:
    a = AgentState(
        pid=1, state="connected", rank=None, local_rank=None, world_size=None, hostname="h",
        argv=(), fingerprint=M(fp), steps=tuple(steps(12, flops=flops)), open_phase=None,
        open_age_s=None, since_step_s=0.1, heartbeat_age_s=0.1, agent_errors=0, dropped=0,
    )  # fmt: skip
    return AgentsSample(target=1, t=1.0, wall=0.0, agents=(a,))


def test_step_signals_carry_mfu_with_its_precision_and_peak():
    st = step_signals(agents(dict(BF16)), ["NVIDIA H100 80GB HBM3"])
    assert st is not None and st.mfu_detail is not None
    assert st.mfu == st.mfu_detail.value == pytest.approx(500 / 989.5)
    assert st.mfu_detail.precision == "bf16" and st.mfu_detail.board == "H100 SXM"
    fp16 = step_signals(agents({"autocast": True, "autocast_dtype": "float16"}), ["NVIDIA L4"])
    assert fp16 is not None and fp16.mfu == pytest.approx(500 / 121)
    none = step_signals(agents(dict(BF16), flops=None), ["NVIDIA H100 80GB HBM3"])
    assert none is not None and none.mfu is None and none.mfu_detail is not None


def _style(level: str) -> Style:
    return Style()


def test_step_pane_names_the_precision_and_peak_or_why_there_is_no_mfu():
    a = agents(dict(BF16)).agents[0]
    head = step_lines(a, _style, 200, "NVIDIA H100 80GB HBM3")[0].plain
    assert "MFU 51% of 989.5 TFLOP/s bf16" in head and "assumed" not in head
    guessed = step_lines(agents({}).agents[0], _style, 200, "NVIDIA H100 80GB HBM3")[0].plain
    assert "MFU 51% of 989.5 TFLOP/s bf16 (precision assumed)" in guessed
    t4 = step_lines(a, _style, 200, "Tesla T4")[0].plain
    assert "MFU n/a (T4 has no bf16 peak)" in t4
    quiet = step_lines(agents(dict(BF16), flops=None).agents[0], _style, 200, "Tesla T4")[0]
    assert "MFU" not in quiet.plain  # no FLOPs reported: nothing to say in the pane


def test_diagnose_json_carries_mfu_and_validates_against_the_schema():
    jsonschema = pytest.importorskip("jsonschema")
    schema = schemas.load("diagnose")
    st = step_signals(agents(dict(BF16)), ["NVIDIA H100 80GB HBM3"])
    source = {"simulated": None, "pid": 1, "command": None, "log": None}
    d = Diagnosis(started=0.0, mfu=st.mfu_detail if st else None)
    doc = json.loads(json.dumps(document(d, source)))
    jsonschema.validate(doc, schema)
    assert doc["mfu"]["precision"] == "bf16" and doc["mfu"]["board"] == "H100 SXM"
    assert doc["mfu"]["value"] == pytest.approx(0.505, abs=0.001)
    assert doc["mfu"]["peak_flops"] == pytest.approx(989.5e12)
    assert "MFU 50.5% of H100 SXM bf16 989.5 TFLOP/s (precision: autocast bfloat16)" in render(doc)
    unknown = step_signals(agents(dict(BF16)), ["NVIDIA A10G"])
    doc = document(Diagnosis(started=0.0, mfu=unknown.mfu_detail if unknown else None), source)
    jsonschema.validate(json.loads(json.dumps(doc)), schema)
    assert doc["mfu"]["value"] is None
    assert "MFU: not computed: board unknown: no peak for NVIDIA A10G" in render(doc)
    doc = document(Diagnosis(started=0.0), source)
    jsonschema.validate(json.loads(json.dumps(doc)), schema)
    assert doc["mfu"] is None and "MFU" not in render(doc)
