"""One GPU in full: every value with its limit, why anything is missing, processes, MIG, and
charts with axes of the recent history."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from gputop.model import DeviceInfo, GpuSample
from gputop.session import SessionState
from gputop.ui.charts import line_chart
from gputop.ui.gpu_text import short_name
from gputop.ui.keybar import KeyItem
from gputop.ui.widgets import KeyBar
from gputop.vocab.reasons import REASON_TEXT

GIB = 1024**3
HISTORY_S = 300.0
"""Seconds of history the charts show."""


def _v(value: float | None, unit: str = "", fmt: str = "{:.0f}") -> str:
    return f"{fmt.format(value)}{unit}" if value is not None else "n/a"


_Row = tuple[str, str | Text]
"""One line of the facts table: its label and its value."""


def facts_table(d: DeviceInfo, s: GpuSample | None) -> Table:
    """The GPU's facts, section by section, as a two-column grid."""
    t = Table.grid(padding=(0, 2))
    t.add_column(style="bold")
    t.add_column()
    for label, value in _fact_rows(d, s):
        t.add_row(label, value)
    return t


def _fact_rows(d: DeviceInfo, s: GpuSample | None) -> list[_Row]:
    """Which GPU, then, once it has a reading and is not lost, every section in order."""
    rows: list[_Row] = [
        ("GPU", f"{d.index}  {d.name}  {d.pci_bus_id or ''}  {d.architecture or ''}"),
        ("UUID", d.uuid or "n/a"),
    ]
    if s is None:
        return [*rows, ("reading", "waiting for the first reading")]
    if s.lost:
        return [*rows, ("LOST", s.lost)]
    return [
        *rows,
        *_limit_rows(d, s),
        *_activity_rows(d, s),
        *_link_rows(d, s),
        ("clocks held by", _reasons(s)),
        *_process_rows(d, s),
        *_na_rows(d, s),
    ]


def _limit_rows(d: DeviceInfo, s: GpuSample) -> list[_Row]:
    """Clocks, power and temperature, each beside the limit that would hold the GPU back."""
    kwh = s.energy_j / 3.6e6 if s.energy_j is not None else None
    return [
        (
            "SM clock",
            f"{_v(s.sm_clock_mhz)} of {_v(d.max_sm_clock_mhz, ' MHz')}"
            f"   memory clock {_v(s.mem_clock_mhz)} of {_v(d.max_mem_clock_mhz, ' MHz')}",
        ),
        (
            "power",
            f"{_v(s.power_w, ' W')} of {_v(s.power_limit_w, ' W')} enforced"
            f" (default {_v(d.default_power_limit_w, ' W')},"
            f" range {_v(d.min_power_limit_w)}-{_v(d.max_power_limit_w, ' W')})"
            f"   energy {_v(kwh, ' kWh', '{:.3f}')}",
        ),
        (
            "temperature",
            f"{_v(s.temp_c, ' C')}  (max operating {_v(d.temp_gpu_max_c, ' C')},"
            f" slowdown {_v(d.temp_slowdown_c, ' C')}, shutdown {_v(d.temp_shutdown_c, ' C')})",
        ),
    ]


def _activity_rows(d: DeviceInfo, s: GpuSample) -> list[_Row]:
    """Memory held and how busy the GPU is: utilisation, and the SMs as GPM sees them."""
    used = s.mem_used_bytes / GIB if s.mem_used_bytes is not None else None
    total = d.mem_total_bytes / GIB if d.mem_total_bytes else None
    reserved = s.mem_reserved_bytes / GIB if s.mem_reserved_bytes is not None else None
    gpm = (
        f"SMs busy {_v(s.sm_active_pct, '%')}  occupancy {_v(s.sm_occupancy_pct, '%')}"
        f"  tensor {_v(s.tensor_active_pct, '%')}  DRAM bandwidth {_v(s.dram_bw_pct, '%')}"
        if d.gpm_supported
        else d.na.get("gpm", "n/a")
    )
    return [
        (
            "memory",
            f"{_v(used, ' GiB', '{:.1f}')} used of {_v(total, ' GiB', '{:.1f}')}"
            f" ({_v(reserved, ' GiB', '{:.1f}')} reserved by the driver)",
        ),
        (
            "utilisation",
            f"{_v(s.util_gpu_pct, '%')} of the time a kernel ran;"
            f" memory busy {_v(s.util_mem_pct, '%')} of the time",
        ),
        ("SM activity (GPM)", gpm),
    ]


def _link_rows(d: DeviceInfo, s: GpuSample) -> list[_Row]:
    """PCIe's link and traffic, and NVLink's where the GPU has links."""
    rows: list[_Row] = [
        (
            "PCIe",
            f"gen{_v(s.pcie_gen)} x{_v(s.pcie_width)}"
            f" of gen{_v(d.pcie_max_gen)} x{_v(d.pcie_max_width)}"
            f"   to GPU {_v(_mb(s.pcie_rx_kbps), ' MB/s', '{:.1f}')}"
            f"   from GPU {_v(_mb(s.pcie_tx_kbps), ' MB/s', '{:.1f}')}",
        )
    ]
    if d.nvlink_links:
        rx = _v(_mb(s.nvlink_rx_kibps, 1.024), " MB/s", "{:.1f}")
        tx = _v(_mb(s.nvlink_tx_kibps, 1.024), " MB/s", "{:.1f}")
        rows.append(("NVLink", f"{d.nvlink_links} links   rx {rx}   tx {tx}"))
    return rows


def _reasons(s: GpuSample) -> Text:
    """What holds the clocks, a reason a line in words, or "nothing"."""
    reasons = Text()
    for r in s.reasons or ():
        reasons.append(f"{r}: {REASON_TEXT.get(r, 'unknown bit')}\n")
    return reasons if s.reasons else Text("nothing")


def _process_rows(d: DeviceInfo, s: GpuSample) -> list[_Row]:
    """Who uses the GPU: each process, then each MIG instance."""
    rows: list[_Row] = []
    for p in s.processes:
        who = f"pid {p.pid}" + (f" ({p.note})" if p.note else "")
        mem = p.used_mem_bytes / GIB if p.used_mem_bytes is not None else None
        use = f"  SM {_v(p.sm_util_pct, '%')}  memory {_v(p.mem_util_pct, '%')}"
        rows.append(("process", f"{who}  {_v(mem, ' GiB', '{:.1f}')}{use}"))
    for info, m in zip(d.mig, s.mig, strict=False):
        mem = m.mem_used_bytes / GIB if m.mem_used_bytes is not None else None
        held = f"{_v(mem, ' GiB', '{:.1f}')} used, {len(m.processes)} processes"
        rows.append((f"MIG {info.mig_index}", f"{info.name}  GI {info.gpu_instance_id}  {held}"))
    return rows


def _na_rows(d: DeviceInfo, s: GpuSample) -> list[_Row]:
    """Why values are missing, one row a reason: the keys it covers, sorted."""
    by_reason: dict[str, list[str]] = {}
    for k, why in {**d.na, **s.na}.items():
        by_reason.setdefault(why, []).append(k)
    return [("n/a", f"{', '.join(sorted(keys))}: {why}") for why, keys in by_reason.items()]


def _mb(kb: float | None, scale: float = 1.0) -> float | None:
    return kb * scale / 1000 if kb is not None else None


KEYS = frozenset({"quit", "help", "pause", "next_gpu", "theme", "interval_up"})
"""The app's keys that the detail screen's key bar names (escape first)."""


class DetailScreen(Screen):
    """Opened with enter on a GPU row; escape goes back."""

    BINDINGS = [
        Binding("escape,backspace", "app.pop_screen", "Back", id="detail.back"),
    ]

    def __init__(self, index: int, devices: Sequence[DeviceInfo]) -> None:
        super().__init__()
        self.index = index
        """Which of ``devices`` is shown (j/k move it)."""
        self.devices = devices

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(id="detail-facts")
            yield Static(id="detail-activity", classes="chart")
            yield Static(id="detail-power", classes="chart")
        yield KeyBar()

    def on_mount(self) -> None:
        items = self.app.key_legend.items(KEYS)  # type: ignore[attr-defined]
        self.query_one(KeyBar).show([KeyItem("esc", "Back"), *items])
        self.app.refresh_detail()  # type: ignore[attr-defined]

    def draw(self, state: SessionState, colorless: bool) -> None:
        """The GPU at ``index`` as ``state`` has it (``colorless``: charts in black and white)."""
        d = self.devices[self.index]
        self.show(d, state.gpus.get(d.index), state.gpu_history(d.index, HISTORY_S), colorless)

    def show(
        self, d: DeviceInfo, s: GpuSample | None, history: Sequence[GpuSample], colorless: bool
    ) -> None:
        self.index = d.index
        self.sub_title = short_name(d.name)
        self.query_one("#detail-facts", Static).update(facts_table(d, s))
        width = max(40, self.size.width - 4)
        t0 = history[-1].t if history else 0.0
        seconds = [h.t - t0 for h in history]
        activity: list[tuple[str, Sequence[float | None]]] = [
            ("util %", [h.util_gpu_pct for h in history])
        ]
        if d.gpm_supported:
            activity.append(("SM active %", [h.sm_active_pct for h in history]))
            activity.append(("tensor %", [h.tensor_active_pct for h in history]))
        clock_pct = [
            100 * h.sm_clock_mhz / d.max_sm_clock_mhz
            if h.sm_clock_mhz is not None and d.max_sm_clock_mhz
            else None
            for h in history
        ]
        activity.append(("SM clock % of max", clock_pct))
        self.query_one("#detail-activity", Static).update(
            line_chart(
                activity, width, 12, 100, "activity (seconds before now)", colorless, seconds
            )
        )
        limit = (s.power_limit_w if s else None) or d.default_power_limit_w or 1.0
        self.query_one("#detail-power", Static).update(
            line_chart(
                [("power W", [h.power_w for h in history])],
                width,
                10,
                d.max_power_limit_w or limit,
                f"power (W; enforced limit {limit:.0f} W)",
                colorless,
                seconds,
            )
        )
