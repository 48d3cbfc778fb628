"""What one GPU row says, as styled text: pure functions, no widgets, no app.

Every value is judged against its own limit (clock against max, power against the enforced
limit, temperature against the slowdown threshold) and styled good / warn / bad / dim by name;
the widget maps those names to the theme's colours. Sparklines use a fixed scale (0-100 %,
0-limit) so that a steady 97 % looks steady.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.style import Style
from rich.text import Text

from gputop.diagnose import (
    COMPUTE_CLOCK,
    IDLE_UTIL,
    LAUNCH_UTIL,
    LOWERED_LIMIT,
    SLOWDOWN_MARGIN_C,
    TINY_KERNELS,
)
from gputop.model import DeviceInfo, GpuSample
from gputop.vocab.reasons import THROTTLING

BLOCKS = "▁▂▃▄▅▆▇█"
GIB = 1024**3
SHORT_REASONS = {
    "sw_power_cap": "POWER CAP",
    "hw_slowdown": "HW SLOWDOWN",
    "sw_thermal": "THERMAL",
    "hw_thermal": "HW THERMAL",
    "hw_power_brake": "POWER BRAKE",
    "sync_boost": "SYNC BOOST",
    "applications_clocks": "app clocks",
    "display_clocks": "display clocks",
    "gpu_idle": "idle",
}
SPARK_COLUMN = 74
WIDE_WIDTH = 120
CLOCK_BAD = 0.7
"""SM clock over its max under which a busy GPU's clock is shown as bad (warned from the
gpu-compute rule's COMPUTE_CLOCK)."""
TEMP_WARN_MARGIN_C = 5
"""Degrees under the GPU's max operating temperature from which it is shown as warm (bad
from the thermal rule's SLOWDOWN_MARGIN_C under the slowdown temperature)."""
GPU_MEM_WARN = 0.95
"""Memory used over total from which a GPU's memory is shown as nearly full."""
"""At this width and above, rows carry history sparklines."""

StyleFor = Callable[[str], Style]
"""Maps a level name (label, value, good, warn, bad, dim, spark) to a style."""


def spark(values: Sequence[float | None], lo: float, hi: float, width: int) -> str:
    """The last ``width`` values as block characters on the fixed scale lo..hi."""
    if width <= 0:
        return ""
    span = (hi - lo) or 1.0
    out = []
    for v in list(values)[-width:]:
        if v is None:
            out.append(" ")
            continue
        level = int((v - lo) / span * len(BLOCKS))
        out.append(BLOCKS[min(len(BLOCKS) - 1, max(0, level))])
    return " " * (width - len(out)) + "".join(out)


def short_name(name: str | None) -> str:
    if not name:
        return "unknown GPU"
    for prefix in ("NVIDIA ", "Tesla "):
        if name.startswith(prefix):
            name = name[len(prefix) :]
    return name


# ---- judging values against their limits ---------------------------------------------------


def busy(s: GpuSample) -> bool:
    return "gpu_idle" not in s.reasons and (s.util_gpu_pct or 0) > IDLE_UTIL


def clock_level(s: GpuSample, d: DeviceInfo) -> str:
    if s.sm_clock_mhz is None or not d.max_sm_clock_mhz:
        return "dim"
    if not busy(s):
        return "dim"
    ratio = s.sm_clock_mhz / d.max_sm_clock_mhz
    if ratio < CLOCK_BAD:
        return "bad"
    if ratio < COMPUTE_CLOCK or any(r in THROTTLING for r in s.reasons):
        return "warn"
    return "good"


def power_level(s: GpuSample, d: DeviceInfo) -> str:
    if (
        s.power_limit_w
        and d.default_power_limit_w
        and s.power_limit_w < LOWERED_LIMIT * d.default_power_limit_w
    ):
        return "warn"  # the box is capped below the card's default limit
    return "value"


def temp_level(s: GpuSample, d: DeviceInfo) -> str:
    if s.temp_c is None:
        return "dim"
    if d.temp_slowdown_c is not None and s.temp_c >= d.temp_slowdown_c - SLOWDOWN_MARGIN_C:
        return "bad"
    hot = d.temp_gpu_max_c if d.temp_gpu_max_c is not None else d.temp_slowdown_c
    if hot is not None and s.temp_c >= hot - TEMP_WARN_MARGIN_C:
        return "warn"
    return "value"


def memory_level(s: GpuSample, d: DeviceInfo) -> str:
    if s.mem_used_bytes is None or not d.mem_total_bytes:
        return "dim"
    return "warn" if s.mem_used_bytes > GPU_MEM_WARN * d.mem_total_bytes else "value"


def sm_active_level(s: GpuSample) -> str:
    """Busy by nvidia-smi's measure but few SMs working: the misleading-utilisation case, as
    the host-overhead rule reads tiny kernels."""
    if s.sm_active_pct is None:
        return "dim"
    util = s.util_gpu_pct or 0
    if util >= LAUNCH_UTIL and s.sm_active_pct < TINY_KERNELS * util:
        return "warn"
    return "value"


def reasons_text(s: GpuSample) -> tuple[str, str]:
    """(words, level) for the active clock-event reasons."""
    throttling = [r for r in s.reasons if r in THROTTLING]
    if throttling:
        return "held: " + ", ".join(SHORT_REASONS.get(r, r) for r in throttling), "bad"
    if s.reasons:
        return ", ".join(SHORT_REASONS.get(r, r) for r in s.reasons), "dim"
    return "", "dim"


# ---- formatting -------------------------------------------------------------------------------


def _n(v: float | None, fmt: str = "{:.0f}") -> str:
    return fmt.format(v) if v is not None else "n/a"


def _gb(kbps: float | None) -> str:
    return _n(kbps / 1e6 if kbps is not None else None, "{:.1f}")


class Line:
    """A Text built from (text, level) parts."""

    def __init__(self, style: StyleFor) -> None:
        self.text = Text(no_wrap=True, overflow="ellipsis")
        self.style = style

    def add(self, text: str, level: str = "value") -> Line:
        self.text.append(text, self.style(level))
        return self

    def label(self, text: str) -> Line:
        return self.add(text, "label")


def gpu_lines(
    d: DeviceInfo,
    s: GpuSample | None,
    style: StyleFor,
    width: int,
    history: Sequence[GpuSample] = (),
    spark_width: int = 40,
) -> tuple[Text, Text]:
    """The two lines of one GPU's row for a terminal ``width`` columns wide."""
    head = Line(style).add(f"{d.index:>2} ", "label").add(f"{short_name(d.name)[:14]:<14} ", "name")
    if s is None:
        return head.add("waiting for the first reading", "dim").text, Text("")
    if s.lost:
        return head.add(f"LOST: {s.lost}", "bad").text, Text("")
    one = head
    one.label("SM ").add(f"{_n(s.sm_clock_mhz):>4}", clock_level(s, d))
    one.label(f"/{_n(d.max_sm_clock_mhz):<4}MHz ")
    one.label("PWR ").add(f"{_n(s.power_w):>4}", power_level(s, d))
    one.label(f"/{_n(s.power_limit_w):<4}W ")
    used = s.mem_used_bytes / GIB if s.mem_used_bytes is not None else None
    total = d.mem_total_bytes / GIB if d.mem_total_bytes else None
    one.label("MEM ").add(f"{_n(used, '{:.1f}'):>5}", memory_level(s, d))
    one.label(f"/{_n(total, '{:.0f}')}G ")
    one.add(f"{_n(s.temp_c):>3}", temp_level(s, d)).label(f"/{_n(d.temp_slowdown_c)}C")
    two = Line(style).label("   util ").add(f"{_n(s.util_gpu_pct):>3}%")
    if d.gpm_supported:
        two.label(" SMact ").add(f"{_n(s.sm_active_pct):>3}%", sm_active_level(s))
        two.label(" tens ").add(f"{_n(s.tensor_active_pct):>3}%")
        two.label(" dram ").add(f"{_n(s.dram_bw_pct):>3}%")
    else:
        two.label(" mem-busy ").add(f"{_n(s.util_mem_pct):>3}%")
        two.label(" SMact ").add(" n/a", "dim")
    wide = width >= WIDE_WIDTH
    two.label("  PCIe rx " if wide else "  rx ").add(_gb(s.pcie_rx_kbps))
    two.label(" tx ").add(_gb(s.pcie_tx_kbps)).label(" GB/s " if wide else "GB/s ")
    words, level = reasons_text(s)
    if wide and history:
        w = max(10, min(spark_width, width - 96))
        metric = "sm_active_pct" if d.gpm_supported else "util_gpu_pct"
        one.add(" " * max(0, SPARK_COLUMN - len(one.text.plain)))
        one.label("  SMact " if d.gpm_supported else "  util  ")
        one.add(spark([getattr(h, metric) for h in history], 0, 100, w), "spark")
        limit = s.power_limit_w or d.default_power_limit_w or 1.0
        two.add(" " * max(0, SPARK_COLUMN - len(two.text.plain)))
        two.label("  power ").add(spark([h.power_w for h in history], 0, limit, w), "spark")
        two.add("  ")
    two.add(words, level)
    return one.text, two.text


# ---- history, when the screen has rows for it (``ui/room.py``) ---------------------------------

HISTORY_LABEL = 10
"""Columns before a history line's graph: "   SMact  "."""
HISTORY_NOW = 13
"""Columns after it: the latest value against its limit, " 1980/1980MHz"."""
REASON_MARKS = {
    "sw_power_cap": "P",
    "hw_power_brake": "B",
    "sw_thermal": "T",
    "hw_thermal": "H",
    "hw_slowdown": "S",
    "sync_boost": "Y",
}
"""A throttle reason's letter on the reasons line (the first that held in a reading); the
letters and the bad colour both say it, for NO_COLOR and mono."""
NOT_HELD = "·"


def history_lines(
    d: DeviceInfo, history: Sequence[GpuSample], style: StyleFor, width: int, lines: int
) -> list[Text]:
    """Up to ``lines`` lines of one GPU's history across ``width`` columns, on fixed scales:
    SM activity (utilisation without GPM), SM clock against its max, power against the
    enforced limit, and where throttle reasons held (second when they hold now: the line that
    explains a slow clock goes next to the activity). Only the last readings that fit are
    read."""
    w = width - HISTORY_LABEL - HISTORY_NOW
    if lines <= 0 or w < 8:
        return []
    recent = list(history[-w:])
    s = recent[-1] if recent else None
    active = d.gpm_supported and any(h.sm_active_pct is not None for h in recent)
    metric = "sm_active_pct" if active else "util_gpu_pct"
    rows = [
        _history(style, "SMact" if active else "util", [getattr(h, metric) for h in recent],
                 100.0, w, f"{_n(getattr(s, metric, None))}%"),
        _history(style, "SM clk", [h.sm_clock_mhz for h in recent], d.max_sm_clock_mhz or 0.0,
                 w, f"{_n(s.sm_clock_mhz if s else None)}/{_n(d.max_sm_clock_mhz)}MHz"),
        _history(style, "power", [h.power_w for h in recent],
                 (s.power_limit_w if s else None) or d.default_power_limit_w or 0.0, w,
                 f"{_n(s.power_w if s else None)}/{_n(s.power_limit_w if s else None)}W"),
    ]  # fmt: skip
    held = [next((REASON_MARKS.get(r, "?") for r in h.reasons if r in THROTTLING), NOT_HELD)
            for h in recent]  # fmt: skip
    line = Line(style).label(f"   {'held':<{HISTORY_LABEL - 3}}").add(" " * (w - len(held)))
    append_runs(line.text, [(c, "dim" if c == NOT_HELD else "bad") for c in held], style)
    throttled = held[-1] != NOT_HELD if held else False
    line.label(f" {'now' if throttled else 'none now':>{HISTORY_NOW - 1}}")
    rows.insert(1 if throttled else 3, line.text)
    if lines > len(rows):  # no chart wants the rows: what else the row's two lines say
        rows += _more(d, recent, style, w, lines - len(rows))
    if lines > len(rows):  # and still more: the activity graph grows taller
        values = [getattr(h, metric) for h in recent]
        tall = tall_spark(values, 0.0, 100.0, w, 1 + lines - len(rows))
        top = Line(style).label(f"   {'SMact' if active else 'util':<{HISTORY_LABEL - 4}}┤")
        top.add(tall[0], "spark").label(f" {_n(getattr(s, metric, None)) + '%':>{HISTORY_NOW - 1}}")
        below = [Line(style).label(f"{'┤':>{HISTORY_LABEL}}").add(t, "spark").text
                 for t in tall[1:]]  # fmt: skip
        rows = [top.text, *below, *rows[1:]]
    return rows[:lines]


def tall_spark(
    values: Sequence[float | None], lo: float, hi: float, w: int, rows: int
) -> list[str]:
    """The last ``w`` values as a graph ``rows`` lines tall (top first), in eighths of a line
    on the fixed scale lo..hi: a screen with rows to spare draws one GPU's activity large."""
    span = (hi - lo) or 1.0
    recent = list(values)[-w:]
    levels = [None if v is None else min(rows * 8, max(0, round((v - lo) / span * rows * 8)))
              for v in recent]  # fmt: skip
    out = []
    for row in range(rows - 1, -1, -1):
        line = []
        for level in levels:
            fill = 0 if level is None else min(8, max(0, level - row * 8))
            line.append(BLOCKS[fill - 1] if fill else " ")
        out.append(" " * (w - len(line)) + "".join(line))
    return out


def _more(
    d: DeviceInfo, recent: list[GpuSample], style: StyleFor, w: int, lines: int
) -> list[Text]:
    """Memory against total, temperature against the slowdown threshold, and DRAM bandwidth
    (the memory controller's busy time without GPM): for a screen with rows and no chart."""
    s = recent[-1] if recent else None
    total = d.mem_total_bytes or 0
    used = [h.mem_used_bytes for h in recent]
    hot = d.temp_slowdown_c or d.temp_gpu_max_c or 0
    dram = d.gpm_supported and any(h.dram_bw_pct is not None for h in recent)
    busy = "dram_bw_pct" if dram else "util_mem_pct"
    now = s.mem_used_bytes / GIB if s and s.mem_used_bytes is not None else None
    rows = [
        _history(style, "memory", [u / GIB if u is not None else None for u in used],
                 total / GIB, w, f"{_n(now, '{:.1f}')}/{_n(total / GIB if total else None)}G"),
        _history(style, "temp", [h.temp_c for h in recent], float(hot), w,
                 f"{_n(s.temp_c if s else None)}/{_n(d.temp_slowdown_c)}C"),
        _history(style, "dram" if dram else "mem-bus", [getattr(h, busy) for h in recent],
                 100.0, w, f"{_n(getattr(s, busy, None))}%"),
    ]  # fmt: skip
    return rows[:lines]


def _history(
    style: StyleFor, label: str, values: list[float | None], hi: float, w: int, now: str
) -> Text:
    """One history line: the label, a sparkline on 0..hi (empty when there is no scale), the
    latest value."""
    line = Line(style).label(f"   {label:<{HISTORY_LABEL - 3}}")
    line.add(spark(values, 0, hi, w) if hi > 0 else " " * w, "spark")
    return line.label(f" {now:>{HISTORY_NOW - 1}}").text


def append_runs(text: Text, cells: Sequence[tuple[str, str]], style: StyleFor) -> None:
    """(character, level) cells appended as one span per run of one level: a span per cell
    made the budget chart, the ranks' bars and the reasons line the screen's costliest parts
    (every repaint renders each span, every change compares them)."""
    start = 0
    for i in range(1, len(cells) + 1):
        if i == len(cells) or cells[i][1] != cells[start][1]:
            text.append("".join(c for c, _ in cells[start:i]), style(cells[start][1]))
            start = i
