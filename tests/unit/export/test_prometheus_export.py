"""The Prometheus exporter on synthetic readings: what a scrape shows, parsed back with
prometheus-client's own parser (names, types, label sets, values), and the listen address."""

from __future__ import annotations

import socket
import threading
import urllib.error
import urllib.request
from pathlib import Path
from types import MappingProxyType as M
from typing import Any

import pytest
from builders import agent, device, gpu_sample, step
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from tests_support import until

from gputop.diagnose import evaluate, reduce_windows
from gputop.diagnose.bounds import NAMES
from gputop.diagnose.findings import Finding, Verdict
from gputop.diagnose.point import EvalPoint
from gputop.export import ExportError, PrometheusSink, open_exporter, parse_listen
from gputop.export.http_server import MAX_CLIENTS
from gputop.export.prometheus import BOUNDS, BUCKETS, PHASES, REASONS
from gputop.model.gpu import GpuSample
from gputop.model.steps import AgentsSample, AgentState, StepRecord
from gputop.vocab.steps import STEP_PHASES as STANDARD_PHASES

REPO = Path(__file__).resolve().parents[3]
MS = 1_000_000


def reading(*agents: AgentState, target: int = 100) -> AgentsSample:
    return AgentsSample(target=target, t=1.0, wall=0.0, agents=agents)


def verdict(bound: str | None, since: float = 10.0) -> Verdict:
    p = Finding(bound, True, 0.7, "why") if bound else None
    return Verdict(p, (), (p,) if p else (), since if p else None)


def scrape(sink: PrometheusSink) -> dict[str, Any]:
    text = generate_latest(sink.registry).decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def values(family: Any, suffix: str = "") -> dict[tuple[tuple[str, str], ...], float]:
    """Samples of a family (``suffix``: "_total", "_bucket"...) keyed by sorted labels."""
    return {
        tuple(sorted(s.labels.items())): s.value
        for s in family.samples
        if s.name == family.name + suffix
    }


def fed(*readings: AgentsSample, gpus: int = 2) -> PrometheusSink:
    sink = PrometheusSink()
    sink.start([device(i) for i in range(gpus)], {"mode": "diagnose"})
    for r in readings:
        sink.agents(r)
    return sink


PHASES_MS = {"data_wait": 5, "forward": 20, "backward": 40, "optimizer": 10}


def steps_of(first: int, last: int, t0_s: float = 0.0) -> tuple[StepRecord, ...]:
    return tuple(
        step(n, round((t0_s + n * 0.1) * 1e9), PHASES_MS, 80, samples=32)
        for n in range(first, last + 1)
    )


def test_every_family_has_its_type_labels_and_a_gputop_name():
    sink = fed(reading(agent(100, steps_of(1, 10), local_rank=0)))
    sink.gpu([gpu_sample(0, 1.0), gpu_sample(1, 1.0)])
    sink.verdict(EvalPoint(now=12.0), verdict("data-input"))
    fams = scrape(sink)
    types = {name: f.type for name, f in fams.items()}
    expected = {
        "gputop_gpu_sm_clock_hertz": "gauge",
        "gputop_gpu_power_watts": "gauge",
        "gputop_gpu_power_limit_watts": "gauge",
        "gputop_gpu_temperature_celsius": "gauge",
        "gputop_gpu_utilization_ratio": "gauge",
        "gputop_gpu_sm_active_ratio": "gauge",
        "gputop_gpu_dram_active_ratio": "gauge",
        "gputop_gpu_memory_used_bytes": "gauge",
        "gputop_gpu_throttle": "gauge",
        "gputop_steps": "counter",
        "gputop_step_seconds": "counter",
        "gputop_phase_seconds": "counter",
        "gputop_samples": "counter",
        "gputop_open_phase_age_seconds": "gauge",
        "gputop_straggler_score": "gauge",
        "gputop_step_duration_seconds": "histogram",
        "gputop_phase_duration_seconds": "histogram",
        "gputop_agent_info": "gauge",
        "gputop_info": "gauge",
        "gputop_verdict": "gauge",
        "gputop_verdict_confidence_ratio": "gauge",
        "gputop_verdict_held_seconds": "gauge",
    }
    assert types == expected  # no tokens reported, no throttle time yet: those are absent
    for f in fams.values():
        for s in f.samples:
            assert s.name.startswith("gputop_")
            if f.type == "counter":
                assert s.name.endswith("_total"), s.name
    gpu_labels = {tuple(sorted(s.labels)) for s in fams["gputop_gpu_power_watts"].samples}
    assert gpu_labels == {("UUID", "gpu")}
    power = values(fams["gputop_gpu_power_watts"])
    assert power[(("UUID", "GPU-00000001"), ("gpu", "1"))] == 650.0
    clock = values(fams["gputop_gpu_sm_clock_hertz"])
    assert clock[(("UUID", "GPU-00000000"), ("gpu", "0"))] == 1980e6
    util = values(fams["gputop_gpu_utilization_ratio"])
    assert util[(("UUID", "GPU-00000000"), ("gpu", "0"))] == pytest.approx(0.9)
    assert {tuple(sorted(s.labels)) for s in fams["gputop_phase_seconds"].samples} == {
        ("phase", "rank")
    }
    info = fams["gputop_agent_info"].samples[0].labels
    assert info == {"rank": "0", "local_rank": "0", "pid": "100", "gpu": "0",
                    "UUID": "GPU-00000000"}  # fmt: skip
    assert fams["gputop_info"].samples[0].labels["mode"] == "diagnose"
    held = fams["gputop_verdict_held_seconds"].samples[0].value
    assert held == 2.0 and fams["gputop_verdict_confidence_ratio"].samples[0].value == 0.7


def test_a_step_repeated_in_several_readings_counts_once():
    sink = fed(
        reading(agent(100, steps_of(1, 5))),
        reading(agent(100, steps_of(1, 5))),  # nothing new
        reading(agent(100, steps_of(3, 8))),  # the window slid: 6, 7, 8 are new
    )
    fams = scrape(sink)
    assert values(fams["gputop_steps"], "_total") == {(("rank", "0"),): 8.0}
    assert values(fams["gputop_step_seconds"], "_total")[(("rank", "0"),)] == pytest.approx(0.64)
    assert values(fams["gputop_samples"], "_total") == {(("rank", "0"),): 8 * 32.0}
    hist = fams["gputop_step_duration_seconds"]
    assert values(hist, "_count") == {(): 8.0}
    assert values(hist, "_bucket")[(("le", "0.1"),)] == 8.0  # 80 ms steps
    assert values(hist, "_bucket")[(("le", "0.05"),)] == 0.0
    assert values(hist, "_sum")[()] == pytest.approx(0.64)


def test_an_agent_that_restarts_from_step_zero_keeps_the_counters_going_up():
    first = reading(agent(100, steps_of(1, 50)))
    # same pid, the agent restarted: its step numbers start over, later in time
    again = reading(agent(100, steps_of(0, 4, t0_s=100.0)))
    # and a new process for the same rank
    other = reading(agent(200, steps_of(1, 3, t0_s=200.0)), target=200)
    sink = fed(first)
    counts = [values(scrape(sink)["gputop_steps"], "_total")[(("rank", "0"),)]]
    for r in (again, again, other):
        sink.agents(r)
        counts.append(values(scrape(sink)["gputop_steps"], "_total")[(("rank", "0"),)])
    assert counts == [50.0, 55.0, 55.0, 58.0]


def test_custom_phases_map_to_other_and_uncovered_time_is_unmarked():
    phases = {"data_wait": 10, "forward": 20, "my_fancy_phase": 5, "checkpointing!": 3}
    sink = fed(
        reading(
            agent(100, (step(1, 0, phases, 50, samples=32), step(2, 10**8, phases, 50, samples=32)))
        )
    )
    fams = scrape(sink)
    seconds = {
        dict(k)["phase"]: v for k, v in values(fams["gputop_phase_seconds"], "_total").items()
    }
    assert seconds == pytest.approx(
        {"data_wait": 0.02, "forward": 0.04, "other": 0.016, "unmarked": 0.024}
    )
    assert set(seconds) <= set(PHASES)
    total = values(fams["gputop_step_seconds"], "_total")[(("rank", "0"),)]
    assert sum(seconds.values()) == pytest.approx(total)
    phase_hist = {dict(k)["phase"] for k in values(fams["gputop_phase_duration_seconds"], "_count")}
    assert phase_hist == {"data_wait", "forward", "other", "unmarked"}
    age = values(fams["gputop_open_phase_age_seconds"])
    assert age == {(("phase", "forward"), ("rank", "0")): 0.25}


def test_open_phase_with_a_custom_name_is_other():
    sink = fed(reading(agent(100, steps_of(1, 3), open_phase="reshard")))
    age = values(scrape(sink)["gputop_open_phase_age_seconds"])
    assert age == {(("phase", "other"), ("rank", "0")): 0.25}


def test_throttle_seconds_accumulate_between_readings_of_each_gpu():
    sink = fed()
    sink.gpu([gpu_sample(0, 10.0, ("sw_power_cap",)), gpu_sample(1, 10.0)])
    sink.gpu([gpu_sample(0, 10.5, ("sw_power_cap", "0x200")), gpu_sample(1, 10.5)])
    sink.gpu([gpu_sample(0, 11.5), gpu_sample(1, 11.5, ("hw_thermal",))])
    sink.gpu([gpu_sample(0, 12.0), gpu_sample(1, 13.0, ("hw_thermal",))])
    fams = scrape(sink)
    total = {
        (dict(k)["gpu"], dict(k)["reason"]): v
        for k, v in values(fams["gputop_gpu_throttle_seconds"], "_total").items()
    }
    # a reading's reasons hold until the next reading of that GPU
    assert total == {("0", "sw_power_cap"): 1.5, ("0", "other"): 1.0, ("1", "hw_thermal"): 1.5}
    now = values(fams["gputop_gpu_throttle"])
    assert len(now) == 2 * len(REASONS)
    on = {(dict(k)["gpu"], dict(k)["reason"]) for k, v in now.items() if v == 1.0}
    assert on == {("1", "hw_thermal")}


def test_missing_gpu_values_are_omitted_not_zero():
    sink = fed(gpus=1)
    sink.gpu([gpu_sample(0, 1.0, dram_bw_pct=None, sm_active_pct=None, reasons_mask=None)])
    fams = scrape(sink)
    assert "gputop_gpu_dram_active_ratio" not in fams
    assert "gputop_gpu_sm_active_ratio" not in fams
    assert "gputop_gpu_throttle" not in fams  # NVML gave no reasons at all
    sink.gpu([GpuSample(0, 2.0, 2.0, lost="fell off the bus")])
    assert "gputop_gpu_power_watts" not in scrape(sink)


@pytest.mark.parametrize("bound", ["data-input/io", "hung", None])
def test_the_verdict_state_set_has_exactly_one_state_on(bound):
    sink = fed()
    sink.verdict(EvalPoint(now=15.0), verdict(bound))
    states = {dict(k)["bound"]: v for k, v in values(scrape(sink)["gputop_verdict"]).items()}
    assert set(states) == {*BOUNDS, "warming-up", "stalled", "none"}
    assert [b for b, v in states.items() if v == 1.0] == [bound or "none"]
    assert sum(states.values()) == 1.0


def test_a_bound_the_list_does_not_know_is_still_the_one_state_on():
    sink = fed()
    sink.verdict(EvalPoint(now=15.0), verdict("brand-new-rule"))
    states = {dict(k)["bound"]: v for k, v in values(scrape(sink)["gputop_verdict"]).items()}
    assert [b for b, v in states.items() if v == 1.0] == ["brand-new-rule"]


def test_the_bound_list_is_every_bound_of_the_registry():
    assert BOUNDS == NAMES, "the state set must list the registry's bounds, in its order"
    assert "data-input/io" in BOUNDS and "hung" in BOUNDS


def test_straggler_score_is_work_time_over_the_median_rank():
    def rank_steps(r: int, extra_ms: float) -> tuple[StepRecord, ...]:
        out = []
        for n in range(1, 21):
            ph = {"forward": 50 + extra_ms, "grad_sync": 30 - extra_ms}
            out.append(step(n, n * 10**8, ph, 80, samples=32))
        return tuple(out)

    ranks = [agent(100 + r, rank_steps(r, 20 if r == 2 else 0), rank=r, local_rank=r)
             for r in range(4)]  # fmt: skip
    fams = scrape(fed(reading(*ranks, target=99), gpus=4))
    scores = {dict(k)["rank"]: v for k, v in values(fams["gputop_straggler_score"]).items()}
    assert scores == pytest.approx({"0": 1.0, "1": 1.0, "2": 70 / 50, "3": 1.0})
    info = {s.labels["rank"]: s.labels for s in fams["gputop_agent_info"].samples}
    assert info["2"]["pid"] == "102" and info["2"]["UUID"] == "GPU-00000002"


def test_rankless_helpers_and_exited_agents_add_no_rank_series():
    main = agent(100, steps_of(1, 5))
    helper = agent(300, steps_of(1, 5))  # a rank-less child that loaded the agent too
    gone = agent(400, steps_of(1, 5), rank=1, state="exited")
    fams = scrape(fed(reading(main, helper, gone)))
    assert values(fams["gputop_steps"], "_total") == {(("rank", "0"),): 5.0, (("rank", "1"),): 5.0}
    assert [s.labels["pid"] for s in fams["gputop_agent_info"].samples] == ["100"]


def test_tokens_are_counted_only_when_the_agent_reports_them():
    s = StepRecord(1, 0, 80 * MS, M({"forward": 80 * MS}), samples=8, tokens=4096)
    fams = scrape(fed(reading(agent(100, (s,)))))
    assert values(fams["gputop_tokens"], "_total") == {(("rank", "0"),): 4096.0}


def test_worst_case_series_per_node_matches_the_docs():
    """8 GPUs, every reason, 8 ranks, every phase: the count docs/prometheus.md states."""
    every = {**{p: 1.0 for p in STANDARD_PHASES}, "custom": 1.0}
    ranks = []
    for r in range(8):
        st = tuple(
            StepRecord(n, n * 10**9, 20 * MS, M({k: int(v * MS) for k, v in every.items()}),
                       samples=1, tokens=1)
            for n in range(1, 6)
        )  # fmt: skip
        ranks.append(agent(100 + r, st, rank=r, local_rank=r))
    sink = fed(reading(*ranks, target=99), gpus=8)
    all_reasons = (*(n for n in REASONS if n != "other"), "0x400")
    sink.gpu([gpu_sample(i, 1.0, all_reasons) for i in range(8)])
    sink.gpu([gpu_sample(i, 2.0, all_reasons) for i in range(8)])
    judged, _ = evaluate(
        reduce_windows([], [], agents=AgentsSample(99, 1.0, 0.0, tuple(ranks))), now=3.0
    )
    assert judged.budget is not None and len(judged.budget.ranks) == 8
    sink.verdict(EvalPoint(now=3.0), judged)
    n = sum(len(f.samples) for f in scrape(sink).values())
    doc = (REPO / "docs" / "prometheus.md").read_text()
    assert f"**{n} series**" in doc, n
    assert len(BUCKETS) == 15 and len(PHASES) == 12


def test_the_budget_is_exported_as_the_verdict_read_it():
    steps = tuple(
        StepRecord(n, n * 10**9, 100 * MS, M({"data_wait": 60 * MS, "forward": 40 * MS}))
        for n in range(1, 8)
    )
    judged, _ = evaluate(
        reduce_windows([], [], agents=AgentsSample(99, 1.0, 0.0, (agent(100, steps),))), now=3.0
    )
    sink = fed(reading(agent(100, steps)))
    sink.verdict(EvalPoint(now=3.0), judged)
    fams = scrape(sink)
    job = values(fams["gputop_step_time_share_ratio"])
    assert job[(("slice", "data"),)] == judged.budget.share("data") == 0.6
    assert sum(job.values()) == 1.0
    ranks = values(fams["gputop_rank_step_time_share_ratio"])
    assert ranks[(("rank", "0"), ("slice", "data"))] == 0.6


def test_a_sink_fed_after_close_stays_quiet():
    sink = open_exporter("127.0.0.1:0")
    sink.close()
    sink.close()
    sink.start([device(0)], {})
    sink.gpu([gpu_sample(0, 1.0)])
    sink.agents(reading(agent(100, steps_of(1, 3))))
    sink.verdict(EvalPoint(now=1.0), verdict("idle"))
    sink.event(1.0, 1.0, "exit", {"code": 0})
    assert sink.problem is None


def test_a_reading_it_cannot_take_sets_problem_instead_of_raising():
    sink = fed()
    sink.gpu([object()])  # type: ignore[list-item]
    assert sink.problem and sink.problem.startswith("Prometheus exporter stopped:")
    assert "\n" not in sink.problem


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("9400", ("127.0.0.1", 9400)),
        ("0", ("127.0.0.1", 0)),
        (":9400", ("127.0.0.1", 9400)),
        ("0.0.0.0:9400", ("0.0.0.0", 9400)),
        ("localhost:1", ("localhost", 1)),
        ("[::1]:9400", ("::1", 9400)),
        ("[::]:65535", ("::", 65535)),
    ],
)
def test_parse_listen(spec, expected):
    assert parse_listen(spec) == expected


@pytest.mark.parametrize(
    "spec", ["", "abc", "host:", "9400:", "::1:9400", "[::1]", "[::1]9400", "[]:80", "70000",
             "-1", "1.5", "127.0.0.1:port"],
)  # fmt: skip
def test_parse_listen_rejects_with_one_line(spec):
    with pytest.raises(ExportError) as e:
        parse_listen(spec)
    assert "give PORT or ADDR:PORT" in str(e.value) and "\n" not in str(e.value)


def test_a_second_exporter_on_the_same_port_is_an_export_error():
    first = open_exporter("0")
    try:
        host, port = first.address
        assert host == "127.0.0.1" and port > 0
        with pytest.raises(ExportError) as e:
            open_exporter(str(port))
        assert str(e.value) == (
            f"cannot listen on 127.0.0.1:{port}: address already in use; "
            "give another port with --prometheus PORT"
        )
    finally:
        first.close()


def test_an_address_not_of_this_machine_is_an_export_error():
    with pytest.raises(ExportError) as e:
        open_exporter("192.0.2.1:0")  # TEST-NET-1: never a local address
    assert str(e.value).startswith("cannot listen on 192.0.2.1:0: ")
    assert "--prometheus ADDR:PORT" in str(e.value)


def test_metrics_are_served_over_http_and_close_stops_the_server():
    sink = open_exporter("127.0.0.1:0")
    sink.start([device(0)], {"mode": "test"})
    sink.agents(reading(agent(100, steps_of(1, 4))))
    url = f"http://127.0.0.1:{sink.address[1]}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            text = r.read().decode()
        fams = {f.name: f for f in text_string_to_metric_families(text)}
        assert values(fams["gputop_steps"], "_total") == {(("rank", "0"),): 4.0}
        assert not [n for n in fams if not n.startswith("gputop_")]  # no default collectors
    finally:
        sink.close()
    with pytest.raises((urllib.error.URLError, ConnectionError, socket.timeout)):
        urllib.request.urlopen(url, timeout=2)


def test_a_job_still_starting_is_the_warming_up_state():
    sink = fed()
    sink.verdict(EvalPoint(now=3.0), Verdict(None, (), (), None, "warming up: 1 of 3 steps seen"))
    states = {dict(k)["bound"]: v for k, v in values(scrape(sink)["gputop_verdict"]).items()}
    assert [b for b, v in states.items() if v == 1.0] == ["warming-up"]
    sink.verdict(EvalPoint(now=4.0), Verdict(None, (), (), None, "no bound stands out yet"))
    states = {dict(k)["bound"]: v for k, v in values(scrape(sink)["gputop_verdict"]).items()}
    assert [b for b, v in states.items() if v == 1.0] == ["none"]
    stall = "no progress for 6 s: pid 100 blocked in Queue.get at t.py:4 (hung after 10 s)"
    sink.verdict(EvalPoint(now=5.0), Verdict(None, (), (), None, stall))
    states = {dict(k)["bound"]: v for k, v in values(scrape(sink)["gputop_verdict"]).items()}
    assert [b for b, v in states.items() if v == 1.0] == ["stalled"]


def test_slow_clients_cannot_pile_up_threads_and_scrapes_resume():
    """500 connections that send nothing: at most MAX_CLIENTS threads serve at once (the rest
    are closed unserved), each idle one is dropped after the timeout, and once they are gone a
    scrape is answered. prometheus_client's own server started a thread for each (506)."""
    sink = open_exporter("127.0.0.1:0")
    addr = ("127.0.0.1", sink.address[1])
    base = threading.active_count()
    idle = []
    try:
        for _ in range(500):
            idle.append(socket.create_connection(addr, timeout=5))
        for s in idle:
            s.setblocking(False)  # looked at below without waiting
        # the server has taken every connection once those over the cap are closed unserved
        until(lambda: sum(map(_hung_up, idle)) >= len(idle) - MAX_CLIENTS, timeout=15,
              what="the connections over the cap closed")  # fmt: skip
        assert threading.active_count() <= base + MAX_CLIENTS
    finally:
        for s in idle:
            s.close()

    def scraped() -> bool:  # the slots free as their idle clients hang up
        try:
            with urllib.request.urlopen(f"http://{addr[0]}:{addr[1]}/metrics", timeout=5) as r:
                assert b"gputop_info" in r.read()
            return True
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    try:
        until(scraped, timeout=15, what="a scrape answered once the slots free", every=0.2)
    finally:
        sink.close()


def _hung_up(s: socket.socket) -> bool:
    """Whether the server closed ``s`` (a nonblocking socket it never sends to)."""
    try:
        return s.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:  # reset
        return True
