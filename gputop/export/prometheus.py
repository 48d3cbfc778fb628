"""The Prometheus exporter: a Sink that keeps what the monitor saw and serves it on /metrics.

The monitor's thread feeds the sink (``start``, ``gpu``, ``agents``, ``verdict``...); scrapes
arrive on prometheus-client's HTTP thread and read the same state under one lock. Metrics are
built at scrape time by a custom Collector on a private registry, so a scrape shows exactly the
latest readings and no process or platform collectors leak in.

Label sets are bounded (docs/prometheus.md gives the worst case per node): GPUs by ``gpu`` and
``UUID`` (dcgm-exporter's labels, so the two join), ranks by ``rank``, phases and throttle
reasons through fixed allow-lists, the verdict by the rules' own bound names. No label is a
step number, and a pid appears only on ``gputop_agent_info``.
"""

from __future__ import annotations

import bisect
import errno
import functools
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

from gputop import __version__
from gputop.diagnose import NAMES, Verdict
from gputop.export.http_server import BoundedServer, start_server
from gputop.model.gpu import DeviceInfo, GpuSample
from gputop.model.host import HostSample
from gputop.model.ranks import RankTotals, StepCounter, rank_labels, rank_work
from gputop.model.stacks import StacksSample
from gputop.model.steps import AgentsSample, AgentState, StepRecord
from gputop.model.throttle import ThrottleClock
from gputop.sinks import SinkError
from gputop.vocab.budget import SLICES
from gputop.vocab.reasons import REASON_BITS
from gputop.vocab.steps import STEP_PHASES as STANDARD_PHASES

if TYPE_CHECKING:
    from gputop.diagnose import EvalPoint

LOCALHOST = "127.0.0.1"
"""Where the exporter listens unless told otherwise: metrics name the job's processes and
ranks, so they are not offered to the network by default."""

PHASES: tuple[str, ...] = (*STANDARD_PHASES, "unmarked")
"""The ``phase`` label's values: the agent's standard phases ("other" among them, which every
custom phase name maps to) and "unmarked", the step time no phase covered."""

REASONS: tuple[str, ...] = (*(name for _, name, _ in REASON_BITS), "other")
"""The ``reason`` label's values: NVML's clock-event reasons; bits NVML's table does not name
("0x200") count as "other"."""

BOUNDS: tuple[str, ...] = NAMES
"""Every bound a rule can name (the registry, gputop/diagnose/bounds.py): ``gputop_verdict``
has one series per name plus "none"."""

NO_BOUND = "none"
WARMING_UP_STATE = "warming-up"
"""The state while the job is still starting and no bound fires (``Verdict.warming_up``)."""
STALLED_STATE = "stalled"
"""The state while the job has stood still for a few seconds, short of its hang limit
(``Verdict.stalled``): an alert can fire on it before ``hung`` does."""

BUCKETS: tuple[float, ...] = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip
"""Histogram upper bounds in seconds, 1 ms to 60 s: from a tiny phase to a checkpoint."""

LE: tuple[str, ...] = (*(floatToGoString(b) for b in BUCKETS), "+Inf")


class ExportError(SinkError):
    """The exporter cannot start (a bad --prometheus value, a port that cannot be had): one
    line, what happened and what to do."""

    when = "a --prometheus value that is no address, or a port that cannot be had"


def parse_listen(spec: str) -> tuple[str, int]:
    """``--prometheus`` value -> (address, port): "9400", "0.0.0.0:9400", "[::1]:9400".
    A bare port listens on 127.0.0.1 only (see LOCALHOST)."""
    s = spec.strip()
    bad = ExportError(
        f"bad --prometheus value {spec!r}: give PORT or ADDR:PORT (IPv6 as [ADDR]:PORT)"
    )
    if s.startswith("["):
        host, sep, port = s[1:].partition("]:")
        if not sep or not host:
            raise bad
    elif ":" in s:
        host, _, port = s.rpartition(":")
        if ":" in host or host.startswith("["):
            raise bad  # an IPv6 address without brackets: where does the port start?
        host = host or LOCALHOST
    else:
        host, port = LOCALHOST, s
    if not (port.isascii() and port.isdigit()) or int(port) > 65535:
        raise bad
    return host, int(port)


def _where(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _listen_error(host: str, port: int, e: OSError) -> str:
    """The one line a user reads when the port cannot be had, with what to do about it."""
    where = _where(host, port)
    if isinstance(e, socket.gaierror) or e.errno == errno.EADDRNOTAVAIL:
        why = e.strerror or str(e)
        return (
            f"cannot listen on {where}: {why.lower()}; give an address of this machine "
            "with --prometheus ADDR:PORT"
        )
    if e.errno == errno.EADDRINUSE:
        why = "address already in use"
    elif e.errno in (errno.EACCES, errno.EPERM):
        why = "permission denied (ports below 1024 need privileges)"
    else:
        why = (e.strerror or str(e)).lower()
    return f"cannot listen on {where}: {why}; give another port with --prometheus PORT"


def open_exporter(spec: str) -> PrometheusSink:
    """Parse ``--prometheus [ADDR:]PORT``, listen there and return the sink serving /metrics.
    Raises ExportError (one line) when the value is bad or the port cannot be had."""
    host, port = parse_listen(spec)
    sink = PrometheusSink()
    try:
        server, thread = start_server(port, host, sink.registry)
    except OSError as e:  # socket.gaierror is one too
        raise ExportError(_listen_error(host, port, e)) from None
    sink.serve(server, thread, host)
    return sink


@dataclass
class _Histogram:
    """Bucket counts (not cumulative; the last is +Inf) and the sum of what was observed."""

    counts: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS) + 1))
    total: float = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(BUCKETS, seconds)] += 1
        self.total += seconds

    def buckets(self) -> list[tuple[str, float]]:
        """Cumulative (le, count) pairs as Prometheus wants them."""
        out, running = [], 0
        for le, n in zip(LE, self.counts, strict=True):
            running += n
            out.append((le, float(running)))
        return out


def phase_label(name: str) -> str:
    """A phase name -> the allow-listed label value: custom names become "other" (a free-form
    label would make one series per name any script invents)."""
    return name if name in STANDARD_PHASES else "other"


def phase_ns(s: StepRecord) -> dict[str, int]:
    """Host nanoseconds per phase label in one step, custom phases folded into "other" and
    the time no phase covered as "unmarked" (so the phases add up to the step)."""
    out: dict[str, int] = {}
    for name, ns in s.phases.items():
        label = phase_label(name)
        out[label] = out.get(label, 0) + ns
    if s.unaccounted_ns:
        out["unmarked"] = s.unaccounted_ns
    return out


def straggler_scores(sample: AgentsSample, labels: dict[int, str]) -> dict[str, float]:
    """rank label -> the rank's score in the straggler definition (``model.ranks``): its
    median work time (step minus grad_sync wait) over the median rank's; 1.0 is typical, 1.3
    is 30% more work per step than the median rank."""
    return {
        labels[r.pid]: r.score
        for r in rank_work(sample).rows
        if r.score is not None and r.pid in labels
    }


def _gpu_labels(devices: dict[int, DeviceInfo], index: int) -> list[str]:
    d = devices.get(index)
    return [str(index), (d.uuid or "") if d else ""]


def _reason_labels(reasons: Sequence[str]) -> set[str]:
    return {r if r in REASONS else "other" for r in reasons}


@dataclass
class _GpuState:
    """The latest reading per GPU and the throttle time accumulated so far."""

    devices: dict[int, DeviceInfo] = field(default_factory=dict)
    latest: dict[int, GpuSample] = field(default_factory=dict)
    throttle_s: dict[tuple[int, str], float] = field(default_factory=dict)
    clock: ThrottleClock = field(default_factory=ThrottleClock)

    def add(self, s: GpuSample) -> None:
        """Throttle time by the model's rule (``ThrottleClock``: a reading's reasons hold
        until the next reading of that GPU, gaps of a minute or more count for none)."""
        dt, reasons = self.clock.charge(s)
        for r in _reason_labels(reasons):
            key = (s.index, r)
            self.throttle_s[key] = self.throttle_s.get(key, 0.0) + dt
        self.latest[s.index] = s


@dataclass
class _StepState:
    """Every agent step counted exactly once, and the latest per-rank gauges."""

    ranks: dict[str, RankTotals] = field(default_factory=dict)
    counter: StepCounter = field(default_factory=StepCounter)
    step_hist: _Histogram = field(default_factory=_Histogram)
    phase_hist: dict[str, _Histogram] = field(default_factory=dict)
    open_phases: dict[tuple[str, str], float] = field(default_factory=dict)
    straggler: dict[str, float] = field(default_factory=dict)
    agents: list[tuple[str, AgentState]] = field(default_factory=list)

    def add(self, sample: AgentsSample) -> None:
        labels = rank_labels(sample)
        for rank, _, fresh in self.counter.new(sample, labels):
            for s in fresh:
                self._add(self.ranks.setdefault(rank, RankTotals()), s)
        live = [(labels[a.pid], a) for a in sample.agents if a.pid in labels]
        self.agents = [(r, a) for r, a in live if a.state != "exited"]
        self.open_phases = {
            (r, phase_label(a.open_phase)): a.open_age_s
            for r, a in self.agents
            if a.open_phase and a.open_age_s is not None
        }
        self.straggler = straggler_scores(sample, labels)

    def _add(self, r: RankTotals, s: StepRecord) -> None:
        """One step newly counted (``StepCounter``: each once, counters keep going up when an
        agent restarts and numbers from 0 again) into its rank's totals and the histograms."""
        r.add(s, phase_label)
        self.step_hist.observe(s.dur_ns / 1e9)
        for phase, ns in phase_ns(s).items():
            self.phase_hist.setdefault(phase, _Histogram()).observe(ns / 1e9)


@dataclass
class _VerdictState:
    bound: str | None = None
    confidence: float = 0.0
    held_s: float = 0.0
    shares: tuple[tuple[str, float], ...] = ()
    """The job's step-time budget (slice, share): the one the verdict was named from."""
    rank_shares: tuple[tuple[str, str, float], ...] = ()
    """(rank label, slice, share) of every rank's budget."""

    def set(self, point: EvalPoint, v: Verdict) -> None:
        budget = v.budget
        self.shares = tuple((x.name, x.share) for x in budget.slices) if budget else ()
        rows: dict[str, tuple[tuple[str, str, float], ...]] = {}
        for r in budget.ranks if budget else ():
            label = r.rank_key
            rows.setdefault(label, tuple((label, n, r.shares[n]) for n in SLICES))
        self.rank_shares = tuple(x for row in rows.values() for x in row)
        p = v.principal
        if p:
            self.bound = p.bound
        else:
            self.bound = WARMING_UP_STATE if v.warming_up else STALLED_STATE if v.stalled else None
        self.confidence = p.confidence if p else 0.0
        now = getattr(point, "now", None)
        held = now - v.since if p and v.since is not None and now is not None else 0.0
        self.held_s = max(0.0, held)


F = TypeVar("F", bound=Callable[..., None])


def _guarded(method: F) -> F:
    """A reading the exporter cannot take must not stop the monitor: say why once in
    ``problem`` and go quiet (the Sinks fan-out then drops the sink)."""

    @functools.wraps(method)
    def wrapper(self: PrometheusSink, *args: Any) -> None:
        if self.problem or self._closed:
            return
        try:
            with self._lock:
                method(self, *args)
        except Exception as e:
            self.problem = f"Prometheus exporter stopped: {type(e).__name__}: {e}"

    return wrapper  # type: ignore[return-value]


class PrometheusSink:
    """The exporter: a gputop Sink whose state a Collector turns into metrics per scrape.

    Built without a server (tests render ``registry`` directly); ``open_exporter`` adds one."""

    def __init__(self) -> None:
        self.problem: str | None = None
        self.registry = CollectorRegistry()
        self.address: tuple[str, int] = ("", 0)
        self._lock = threading.Lock()
        self._closed = False
        self._server: BoundedServer | None = None
        self._thread: threading.Thread | None = None
        self._mode = ""
        self._gpus = _GpuState()
        self._steps = _StepState()
        self._verdict: _VerdictState | None = None
        self.registry.register(_Collector(self))

    def serve(self, server: BoundedServer, thread: threading.Thread, host: str) -> None:
        """Take ownership of the HTTP server (``close`` shuts it down)."""
        self._server, self._thread = server, thread
        self.address = (host, int(server.server_address[1]))

    @_guarded
    def start(self, devices: Sequence[DeviceInfo], meta: dict[str, Any]) -> None:
        self._gpus.devices = {d.index: d for d in devices}
        self._mode = str(meta.get("mode") or "")

    @_guarded
    def gpu(self, samples: Sequence[GpuSample]) -> None:
        for s in samples:
            self._gpus.add(s)

    def host(self, sample: HostSample) -> None:
        """Host readings are not exported (the node exporter has them)."""

    @_guarded
    def agents(self, sample: AgentsSample) -> None:
        self._steps.add(sample)

    def stacks(self, sample: StacksSample) -> None:
        """Stack samples are not exported: no bounded label set describes a stack."""

    @_guarded
    def verdict(self, point: EvalPoint, verdict: Verdict) -> None:
        self._verdict = self._verdict or _VerdictState()
        self._verdict.set(point, verdict)

    def event(self, t: float, wall: float, kind: str, data: dict[str, Any]) -> None:
        """One-off events have no place in a scrape."""

    def close(self) -> None:
        """Stop serving; later readings are ignored. Safe to call twice."""
        self._closed = True
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def metrics(self) -> list[Metric]:
        """Every metric family as of now (the Collector's work, on the scrape thread)."""
        with self._lock:
            families = [
                *_info(self._mode),
                *_gpu_metrics(self._gpus),
                *_step_metrics(self._steps),
                *_histograms(self._steps),
                *_agent_info(self._steps, self._gpus.devices),
                *_verdict_metrics(self._verdict),
            ]
        return [m for m in families if m.samples]  # no HELP/TYPE lines without a series


class _Collector(Collector):
    def __init__(self, sink: PrometheusSink) -> None:
        self.sink = sink

    def collect(self) -> Iterator[Metric]:
        yield from self.sink.metrics()


def _info(mode: str) -> list[Metric]:
    m = InfoMetricFamily("gputop", "gputop's version and what it monitors", labels=["mode"])
    m.add_metric([mode], {"version": __version__})
    return [m]


GPU_GAUGES: tuple[tuple[str, str, str, float], ...] = (
    ("sm_clock_hertz", "sm_clock_mhz", "SM clock", 1e6),
    ("power_watts", "power_w", "Power draw", 1.0),
    ("power_limit_watts", "power_limit_w", "Enforced power limit", 1.0),
    ("temperature_celsius", "temp_c", "GPU temperature", 1.0),
    ("utilization_ratio", "util_gpu_pct", "Share of time a kernel ran (NVML utilization)", 0.01),
    ("sm_active_ratio", "sm_active_pct", "Share of SMs busy (GPM)", 0.01),
    ("dram_active_ratio", "dram_bw_pct", "DRAM bandwidth used over peak (GPM)", 0.01),
    ("memory_used_bytes", "mem_used_bytes", "Device memory used", 1.0),
)
"""(metric suffix, GpuSample field, help, factor to the base unit)."""


def _gpu_metrics(g: _GpuState) -> list[Metric]:
    out: list[Metric] = []
    live = [s for s in g.latest.values() if s.lost is None]
    for suffix, attr, text, factor in GPU_GAUGES:
        m = GaugeMetricFamily(f"gputop_gpu_{suffix}", text, labels=["gpu", "UUID"])
        for s in live:
            value = getattr(s, attr)
            if value is not None:
                m.add_metric(_gpu_labels(g.devices, s.index), value * factor)
        out.append(m)
    labels = ["gpu", "UUID", "reason"]
    now = GaugeMetricFamily(
        "gputop_gpu_throttle", "1 while a clock-event reason is active", labels=labels
    )
    total = CounterMetricFamily(
        "gputop_gpu_throttle_seconds", "Time a clock-event reason was active", labels=labels
    )
    for s in live:
        if s.reasons_mask is not None:
            active = _reason_labels(s.reasons)
            for r in REASONS:
                now.add_metric([*_gpu_labels(g.devices, s.index), r], float(r in active))
    for (index, r), seconds in sorted(g.throttle_s.items()):
        total.add_metric([*_gpu_labels(g.devices, index), r], seconds)
    return [*out, now, total]


def _step_metrics(st: _StepState) -> list[Metric]:
    rank = ["rank"]
    steps = CounterMetricFamily("gputop_steps", "Training steps finished", labels=rank)
    step_s = CounterMetricFamily("gputop_step_seconds", "Time in training steps", labels=rank)
    phase_s = CounterMetricFamily(
        "gputop_phase_seconds", "Step time per phase (host clock)", labels=["rank", "phase"]
    )
    samples = CounterMetricFamily("gputop_samples", "Samples the steps reported", labels=rank)
    tokens = CounterMetricFamily("gputop_tokens", "Tokens the steps reported", labels=rank)
    for name, r in sorted(st.ranks.items()):
        steps.add_metric([name], r.steps)
        step_s.add_metric([name], r.seconds)
        for phase in PHASES:
            if phase in r.phases:
                phase_s.add_metric([name, phase], r.phases[phase])
        if r.samples is not None:
            samples.add_metric([name], r.samples)
        if r.tokens is not None:
            tokens.add_metric([name], r.tokens)
    age = GaugeMetricFamily(
        "gputop_open_phase_age_seconds",
        "How long the phase each rank is in now has been open",
        labels=["rank", "phase"],
    )
    for (name, phase), seconds in sorted(st.open_phases.items()):
        age.add_metric([name, phase], seconds)
    straggler = GaugeMetricFamily(
        "gputop_straggler_score",
        "Rank's median work time (step minus grad_sync) over the median rank's; 1.0 = typical",
        labels=rank,
    )
    for name, score in sorted(st.straggler.items()):
        straggler.add_metric([name], score)
    return [steps, step_s, phase_s, samples, tokens, age, straggler]


def _histograms(st: _StepState) -> list[Metric]:
    step = HistogramMetricFamily("gputop_step_duration_seconds", "Step durations on this node")
    if any(st.step_hist.counts):
        step.add_metric([], st.step_hist.buckets(), st.step_hist.total)
    phase = HistogramMetricFamily(
        "gputop_phase_duration_seconds", "Phase durations per step on this node", labels=["phase"]
    )
    for name in PHASES:
        h = st.phase_hist.get(name)
        if h is not None:
            phase.add_metric([name], h.buckets(), h.total)
    return [step, phase]


def _agent_info(st: _StepState, devices: dict[int, DeviceInfo]) -> list[Metric]:
    m = InfoMetricFamily(
        "gputop_agent", "One per live agent: its rank, process and GPU", labels=["rank"]
    )
    for rank, a in st.agents:
        lr = a.local_rank
        gpu, uuid = _gpu_labels(devices, lr) if lr is not None and lr in devices else ("", "")
        local = "" if lr is None else str(lr)
        m.add_metric([rank], {"local_rank": local, "pid": str(a.pid), "gpu": gpu, "UUID": uuid})
    return [m]


def _verdict_metrics(v: _VerdictState | None) -> list[Metric]:
    if v is None:
        return []
    states = [*BOUNDS, WARMING_UP_STATE, STALLED_STATE, NO_BOUND]
    current = v.bound or NO_BOUND
    if current not in states:
        states.append(current)  # a rule newer than this list: still exactly one 1
    m = GaugeMetricFamily(
        "gputop_verdict", "State set: 1 for the principal bound, 0 for the others", labels=["bound"]
    )
    for bound in states:
        m.add_metric([bound], float(bound == current))
    conf = GaugeMetricFamily(
        "gputop_verdict_confidence_ratio", "Confidence of the principal bound (0 without one)"
    )
    conf.add_metric([], v.confidence)
    held = GaugeMetricFamily(
        "gputop_verdict_held_seconds", "How long the principal bound has held (0 without one)"
    )
    held.add_metric([], v.held_s)
    out: list[Metric] = [m, conf, held]
    if v.shares:
        job = GaugeMetricFamily(
            "gputop_step_time_share_ratio",
            "The job's step-time budget: share of wall time per slice (they add up to 1)",
            labels=["slice"],
        )
        for name, share in v.shares:
            job.add_metric([name], share)
        per_rank = GaugeMetricFamily(
            "gputop_rank_step_time_share_ratio",
            "Each rank's step-time budget: share of its wall time per slice",
            labels=["rank", "slice"],
        )
        for label, name, share in v.rank_shares:
            per_rank.add_metric([label, name], share)
        out += [job, per_rank]
    return out
