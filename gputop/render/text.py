"""A snapshot document as a plain-text table for a terminal, a log or an email."""

from __future__ import annotations

from typing import Any

from gputop.vocab.reasons import REASON_TEXT, THROTTLING

GIB = 1024**3
PCT = "{:.0f}%"


def _num(v: float | None, fmt: str = "{:.0f}", na: str = "n/a") -> str:
    return fmt.format(v) if v is not None else na


def _pair(cur: float | None, top: float | None, unit: str) -> str:
    return f"{_num(cur)}/{_num(top)} {unit}"


def _gib(v: int | None) -> str:
    return _num(v / GIB if v is not None else None, "{:.1f}")


def render_snapshot(doc: dict[str, Any]) -> str:
    src = doc["source"]
    head = f"gputop snapshot  {doc['taken_at']}  driver {src['driver_version']}"
    if src["cuda_version"]:
        head += f"  CUDA {src['cuda_version']}"
    lines = [head]
    if src["kind"] == "simulated":
        lines.append(f"SIMULATED board: {src['board']} (no real GPU is being read)")
    for d in doc["devices"]:
        lines.append("")
        lines.extend(_device_lines(d))
    if doc.get("host"):
        lines.append("")
        lines.extend(_host_lines(doc["host"]))
    return "\n".join(lines) + "\n"


def _host_lines(h: dict[str, Any]) -> list[str]:
    if h["state"] == "exited":
        code = f" with code {h['exit_code']}" if h["exit_code"] is not None else ""
        return [f"process {h['pid']} exited{code}"]
    out = [
        f"process {h['pid']}  effective CPUs {_num(h['effective_cpus'], '{:.1f}')}"
        f" ({h['effective_cpus_source']})"
    ]
    for p in h["processes"]:
        out.append(
            f"  {p['role']:<6} pid {p['pid']:<7} {p['name']:<16}"
            f" CPU {_num(p['cpu_cores'], '{:.2f}')}"
            f"  threads {p['num_threads']} ({_num(p['threads_running'])} running)"
            f"  run-queue wait {_num(p['runq_wait'], '{:.2f}')}"
            f"  RSS {_gib(p['rss_bytes'])} GiB"
        )
    c = h.get("cgroup")
    if c:
        quota = _num(c["cpu_quota_cpus"], "{:.2f}") if c["cpu_quota_cpus"] else "none"
        limit = f"{_gib(c['mem_limit_bytes'])} GiB" if c["mem_limit_bytes"] else "none"
        out.append(
            f"  cgroup {c['version']}: CPU quota {quota}, throttled"
            f" {_num(c['throttled_ratio'], '{:.0%}')} of periods;"
            f" memory working set {_gib(c['mem_working_set_bytes'])} GiB, limit {limit}"
        )
    for k, v in h["env"].items():
        out.append(f"  {k}={v}")
    return out


def _device_lines(d: dict[str, Any]) -> list[str]:
    title = f"GPU {d['index']}  {d['name'] or 'unknown'}  {d['pci_bus_id'] or ''}"
    if d["architecture"]:
        title += f"  {d['architecture']}"
    s = d["sample"]
    if s is None:
        return [title, "  no sample"]
    if s["lost"]:
        return [title, f"  LOST: {s['lost']}"]
    out = [title]
    out.append(
        f"  SM {_pair(s['sm_clock_mhz'], d['max_sm_clock_mhz'], 'MHz')}"
        f"   mem {_pair(s['mem_clock_mhz'], d['max_mem_clock_mhz'], 'MHz')}"
        f"   power {_pair(s['power_w'], s['power_limit_w'], 'W')}"
        + (
            f" (default {_num(d['default_power_limit_w'])} W)"
            if d["default_power_limit_w"] is not None
            and s["power_limit_w"] is not None
            and s["power_limit_w"] < d["default_power_limit_w"]
            else ""
        )
        + f"   temp {_num(s['temp_c'])} C (slowdown {_num(d['temp_slowdown_c'])} C)"
    )
    util = f"  util {_num(s['util_gpu_pct'], PCT)}   mem-busy {_num(s['util_mem_pct'], PCT)}"
    if d["gpm_supported"]:
        util += (
            f"   SM active {_num(s['sm_active_pct'], PCT)}"
            f"   occupancy {_num(s['sm_occupancy_pct'], PCT)}"
            f"   tensor {_num(s['tensor_active_pct'], PCT)}"
            f"   DRAM bw {_num(s['dram_bw_pct'], PCT)}"
        )
    out.append(util)
    out.append(
        f"  memory {_gib(s['mem_used_bytes'])}/{_gib(d['mem_total_bytes'])} GiB"
        f"   PCIe gen{_num(s['pcie_gen'])} x{_num(s['pcie_width'])}"
        f" (max gen{_num(d['pcie_max_gen'])} x{_num(d['pcie_max_width'])})"
        f"   rx {_num(_mb(s['pcie_rx_kbps']), '{:.1f}')} MB/s"
        f"   tx {_num(_mb(s['pcie_tx_kbps']), '{:.1f}')} MB/s"
        + (
            f"   NVLink rx {_num(_mb(s['nvlink_rx_kibps'], 1.024), '{:.1f}')} MB/s"
            f" tx {_num(_mb(s['nvlink_tx_kibps'], 1.024), '{:.1f}')} MB/s"
            if d["nvlink_links"]
            else ""
        )
    )
    reasons = s["reasons"]
    if reasons:
        worst = [r for r in reasons if r in THROTTLING] or reasons
        out.append(
            "  clocks held by: " + "; ".join(f"{r} ({REASON_TEXT.get(r, '?')})" for r in worst)
        )
    elif s["reasons_mask"] is not None:
        out.append("  clocks held by: nothing")
    for p in s["processes"]:
        who = f"pid {p['pid']}"
        if p["note"]:
            who += f" ({p['note']})"
        out.append(
            f"  process {who}  {_gib(p['used_mem_bytes'])} GiB"
            f"  SM {_num(p['sm_util_pct'], PCT)}  mem {_num(p['mem_util_pct'], PCT)}"
        )
    for m_info, m in zip(d["mig"], s["mig"], strict=False):
        out.append(
            f"  MIG {m_info['mig_index']}  {m_info['name']}  GI {m_info['gpu_instance_id']}"
            f"  memory {_gib(m['mem_used_bytes'])}/{_gib(m['mem_total_bytes'])} GiB"
            f"  {len(m['processes'])} processes"
        )
    na = {**d["na"], **s["na"]}
    if na:
        by_reason: dict[str, list[str]] = {}
        for k, why in na.items():
            by_reason.setdefault(why, []).append(k)
        for why, keys in by_reason.items():
            out.append(f"  n/a ({why}): {', '.join(sorted(keys))}")
    return out


def _mb(kb: float | None, scale: float = 1.0) -> float | None:
    return kb * scale / 1000.0 if kb is not None else None
