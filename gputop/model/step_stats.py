"""Statistics over agent steps, shared by the panes and the verdict. Pure."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gputop.model.steps import PIPELINE, StepRecord
from gputop.model.window import percentile
from gputop.vocab.steps import DATA_WAIT, GRAD_SYNC

WINDOW = 50
"""Steps the statistics look at (the first step, which includes start-up, is skipped)."""

PRECISIONS = ("bf16", "fp16", "tf32", "fp32")
"""Training precisions MFU knows a peak for: tensor-core bf16 / fp16 (autocast or half
weights), TF32 (fp32 matmuls on tensor cores), fp32 (no tensor cores)."""

PEAK_DENSE: dict[str, dict[str, float | None]] = {
    "H100 SXM": {"bf16": 1979e12 / 2, "fp16": 1979e12 / 2, "tf32": 989e12 / 2, "fp32": 67e12},
    "H100 PCIe": {"bf16": 1513e12 / 2, "fp16": 1513e12 / 2, "tf32": 756e12 / 2, "fp32": 51e12},
    "H100 NVL": {"bf16": 1671e12 / 2, "fp16": 1671e12 / 2, "tf32": 835e12 / 2, "fp32": 60e12},
    "H200 SXM": {"bf16": 1979e12 / 2, "fp16": 1979e12 / 2, "tf32": 989e12 / 2, "fp32": 67e12},
    "H200 NVL": {"bf16": 1671e12 / 2, "fp16": 1671e12 / 2, "tf32": 835e12 / 2, "fp32": 60e12},
    "GH200": {"bf16": 1979e12 / 2, "fp16": 1979e12 / 2, "tf32": 989e12 / 2, "fp32": 67e12},
    "A100": {"bf16": 312e12, "fp16": 312e12, "tf32": 156e12, "fp32": 19.5e12},
    "L40S": {"bf16": 362.05e12, "fp16": 362.05e12, "tf32": 183e12, "fp32": 91.6e12},
    "L4": {"bf16": 242e12 / 2, "fp16": 242e12 / 2, "tf32": 120e12 / 2, "fp32": 30.3e12},
    "A10": {"bf16": 125e12, "fp16": 125e12, "tf32": 62.5e12, "fp32": 31.2e12},
    "T4": {"bf16": None, "fp16": 65e12, "tf32": None, "fp32": 8.1e12},
    "B200": {"bf16": 4.5e15 / 2, "fp16": 4.5e15 / 2, "tf32": 2.2e15 / 2, "fp32": 75e12},
    "GB200": {"bf16": 5e15 / 2, "fp16": 5e15 / 2, "tf32": 2.5e15 / 2, "fp32": 80e12},
}
"""Peak dense FLOP/s per board and precision, for MFU. None: the board has no such unit (T4,
Turing: no bf16 and no TF32 tensor cores; fp32 matmuls asking for TF32 run in fp32 there).

From NVIDIA's datasheets, which print tensor-core figures "with sparsity" (2:4 structured,
twice the dense rate): those are halved here, hence the ``/ 2``; fp32 is the plain CUDA-core
rate. H100 SXM / PCIe / NVL: the H100 Tensor Core GPU datasheet (the current edition, which
gives H100 NVL per GPU: 60 / 835* / 1,671* TFLOPS; an earlier one gave a pair of NVL cards).
H200 SXM / NVL: the H200 datasheet; GH200: the GH200 Grace Hopper datasheet (the SXM H100
figures). A100 (40 and 80 GB, SXM and PCIe: the same dense peaks), A10, L40S, L4, T4: their
datasheets (A100 and A10 print dense figures too; T4: "mixed precision FP16/FP32 65
TFLOPS"). The H100 SXM / PCIe, A100, A10 and T4 rows agree with MosaicML Composer's
``GPU_AVAILABLE_FLOPS`` (composer/callbacks/speed_monitor.py). B200 and GB200: NVIDIA's
Blackwell (HGX B200 / GB200 NVL72) specifications per GPU, 4.5 / 5 PFLOPS fp16-bf16 and
2.2 / 2.5 PFLOPS TF32 with sparsity; NVIDIA has revised the B200's fp32 figure between
editions (80, then 75 TFLOPS), its tensor figures not."""

BOARD_NAMES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("GH200",), "GH200"),
    (("GB200",), "GB200"),
    (("H100", "NVL"), "H100 NVL"),
    (("H100", "PCIE"), "H100 PCIe"),
    (("H100", "HBM2E"), "H100 PCIe"),
    (("H100", "HBM3"), "H100 SXM"),
    (("H100", "SXM"), "H100 SXM"),
    (("H100", "SXM5"), "H100 SXM"),
    (("H200", "NVL"), "H200 NVL"),
    (("H200",), "H200 SXM"),
    (("A100",), "A100"),
    (("L40S",), "L40S"),
    (("L4",), "L4"),
    (("A10",), "A10"),
    (("T4",), "T4"),
    (("B200",), "B200"),
)
"""NVML name tokens -> row of PEAK_DENSE, most specific first. Names are split into words at
spaces, "-" and "_" and compared whole, so "NVIDIA A100-SXM4-80GB" is an A100 but "NVIDIA
A10G", "NVIDIA L40" and "NVIDIA GB200" are not an A10, an L4 or a B200. An H100 that names
no form factor ("NVIDIA H100") is left unknown: SXM, PCIe and NVL peaks differ by a third.
A plain "NVIDIA H200" is the SXM part (the NVL card says so)."""


WARMUP_STEPS = 10
"""Steps from the start of a run that may be warm-up: allocator growth, cuDNN autotuning,
torch.compile's first graphs."""
WARMUP_SLOW = 2.0
"""... and are, while each is over this many times the median of the steps that follow."""


def usable(steps: Sequence[StepRecord], window: int = WINDOW) -> list[StepRecord]:
    """The last WINDOW steps without the first (start-up) and without the run's leading
    warm-up steps: early steps far slower than the rest would skew the median and read as
    spikes (the issue's "warm-up and compile steps excluded")."""
    rest = list(steps[1:])
    if len(rest) >= 4 and rest[0].step <= WARMUP_STEPS:  # past them, nothing to look at
        typical = percentile(sorted(s.dur_ns for s in rest), 50)
        while (
            len(rest) > 3
            and rest[0].step <= WARMUP_STEPS
            and rest[0].dur_ns > WARMUP_SLOW * typical
        ):
            rest.pop(0)
    return rest[-window:]


def phase_shares(steps: Sequence[StepRecord]) -> list[tuple[str, float]]:
    """(phase, share of step time) in pipeline order, custom phases after, then unmarked."""
    total = sum(s.dur_ns for s in steps)
    if not total:
        return []
    sums: dict[str, int] = {}
    for s in steps:
        for name, ns in s.phases.items():
            sums[name] = sums.get(name, 0) + ns
    order = [p for p in PIPELINE if p in sums] + sorted(set(sums) - set(PIPELINE))
    shares = [(p, sums[p] / total) for p in order]
    unmarked = max(0.0, 1.0 - sum(share for _, share in shares))
    if unmarked > 0.005:
        shares.append(("unmarked", unmarked))
    return shares


def loop_share(steps: Sequence[StepRecord], outside: Sequence[str] = ()) -> float:
    """The median step's share of time outside every phase the agent marks (``outside`` names
    phases counted as outside too, such as "other"): what the loop's own Python takes in a
    typical step. The median, so a periodic spike (an eval, a checkpoint) does not count; the
    step's garbage collection is taken off (it pauses whatever runs, and is side work)."""
    per_step = sorted(
        max(0, s.unaccounted_ns + sum(s.phases.get(p, 0) for p in outside) - (s.gc_ns or 0))
        / s.dur_ns
        for s in steps
        if s.dur_ns > 0
    )
    return statistics.median(per_step) if per_step else 0.0


def tail_ms(durs_ns: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0-1) of step durations, in ms: the nearest rank at or below, so a
    window's single slowest step is its p99 only when it has over a hundred steps."""
    ordered = sorted(durs_ns)
    return ordered[int(q * (len(ordered) - 1))] / 1e6 if ordered else 0.0


def median_ms(values: Sequence[float]) -> float | None:
    return percentile(sorted(values), 50) / 1e6 if values else None


def work_ns(s: StepRecord) -> int:
    """The step minus time waiting in gradient sync: what this rank itself had to do."""
    return s.dur_ns - s.phases.get(GRAD_SYNC, 0)


def gc_share(steps: Sequence[StepRecord]) -> tuple[float | None, int]:
    """(share of step time in Python garbage collection, full collections), over the steps
    whose agent timed GC; (None, 0) when none did. GC time lies inside the phases it paused,
    so it is not one more share of the phase bar."""
    timed = [s for s in steps if s.gc_ns is not None]
    total = sum(s.dur_ns for s in timed)
    if not total:
        return None, 0
    return sum(s.gc_ns or 0 for s in timed) / total, sum(s.gc_full or 0 for s in timed)


def data_cpu_share(steps: Sequence[StepRecord]) -> float | None:
    """The share of the training thread's batch waits it spent on a CPU (its own CPU time in
    them over their length), over the steps whose agent timed it; None when none did or they
    waited for no time."""
    timed = [s for s in steps if s.data_cpu_ns is not None]
    waited = sum(s.phases.get(DATA_WAIT, 0) for s in timed)
    return sum(s.data_cpu_ns or 0 for s in timed) / waited if waited else None


def board_of(gpu_name: str | None) -> str | None:
    """The PEAK_DENSE row for an NVML device name, or None when the board is not in it."""
    if not isinstance(gpu_name, str):
        return None
    words = set(gpu_name.upper().replace("-", " ").replace("_", " ").split())
    return next((board for need, board in BOARD_NAMES if words.issuperset(need)), None)


def peak_flops(gpu_name: str | None, precision: str = "bf16") -> float | None:
    """Peak dense FLOP/s of the board in that precision; None: unknown board or no such unit."""
    board = board_of(gpu_name)
    return PEAK_DENSE[board].get(precision) if board else None


HALF = {"bfloat16": "bf16", "float16": "fp16"}
MATMUL_PRECISION = {"highest": "fp32", "high": "tf32", "medium": "tf32"}


def training_precision(fingerprint: Mapping[str, object]) -> tuple[str | None, str]:
    """(precision, what it rests on) from the agent's fingerprint; None when it did not say.

    autocast seen with bfloat16 / float16 -> bf16 / fp16; no autocast but bf16 / fp16 weights
    -> that; no autocast and fp32 weights -> TF32 when torch.get_float32_matmul_precision() is
    "high" or "medium", fp32 when "highest". The fingerprint came over the socket: anything
    but the expected strings and booleans counts as not said."""

    def text(key: str) -> str | None:
        v = fingerprint.get(key)
        return v if isinstance(v, str) else None

    autocast = fingerprint.get("autocast")
    if autocast is True:
        dtype = text("autocast_dtype")
        if dtype in HALF:
            return HALF[dtype], f"autocast {dtype}"
        return None, f"autocast {dtype}" if dtype else "autocast on, its dtype not reported"
    if autocast is not False:
        return None, "autocast not reported"
    weights = text("param_dtype")
    if weights in HALF:
        return HALF[weights], f"{weights} weights, no autocast"
    matmul = text("float32_matmul_precision")
    if matmul in MATMUL_PRECISION:
        return MATMUL_PRECISION[matmul], f'no autocast, float32_matmul_precision "{matmul}"'
    return None, "no autocast, float32 matmul precision not reported"


@dataclass(frozen=True)
class Mfu:
    """Model FLOPs utilisation and what it was computed against."""

    value: float | None
    """Model FLOP/s achieved over the board's peak; None when not computed (``note`` says why)."""
    precision: str
    """The precision of the peak: the training precision, or bf16 when that is unknown."""
    precision_basis: str
    """What the precision rests on (the agent's fingerprint), or why it is unknown."""
    precision_assumed: bool
    """True: the agent did not say, bf16 is assumed."""
    board: str | None
    """The row of PEAK_DENSE used (None: no GPU name in the table)."""
    peak_flops: float | None
    note: str | None
    """Why ``value`` is None, or a caveat on it."""


def mfu_of(
    steps: Sequence[StepRecord], gpu_names: Sequence[str], fingerprint: Mapping[str, object]
) -> Mfu:
    """MFU over the steps that report model FLOPs, against the first board with a known peak.

    Precision unknown: bf16, the usual training precision, is assumed and said. A board
    without a TF32 unit (T4) runs fp32 matmuls asking for TF32 in fp32: the fp32 peak."""
    precision, basis = training_precision(fingerprint)
    assumed = precision is None
    prec = precision or "bf16"
    names = [n for n in gpu_names if isinstance(n, str) and n]
    name = next((n for n in names if board_of(n)), names[0] if names else None)
    board = board_of(name)
    peak = PEAK_DENSE[board].get(prec) if board else None
    if board and peak is None and prec == "tf32":
        prec, peak = "fp32", PEAK_DENSE[board].get("fp32")
        basis += f"; {board} has no TF32: fp32"
    note: str | None = None
    if assumed:
        note = f"precision unknown ({basis}): assuming bf16"
    timed = [s for s in steps if s.flops is not None]
    seconds = sum(s.dur_ns for s in timed) / 1e9
    value = None
    if not timed:
        note = "no FLOPs reported (step(flops=...) or GPUTOP_FLOPS_STEP=N)"
    elif board is None:
        note = f"board unknown: no peak for {name}" if name else "board unknown: no GPU name"
    elif peak is None:
        note = f"{board} has no {prec} peak" + (" (precision unknown, bf16 assumed)" * assumed)
    elif seconds <= 0:
        note = "steps of no duration"
    else:
        value = sum(s.flops or 0.0 for s in timed) / seconds / peak
        if value > 1:
            note = (note + "; " if note else "") + (
                f"over the {prec} peak: FLOPs overstated or the precision is not {prec}"
            )
    return Mfu(value, prec, basis, assumed, board, peak, note)
