"""`gputop demo --prometheus` in a real terminal: /metrics scraped over HTTP while the demo (with
the real example trainer) runs, parsed with prometheus-client's own parser: names, types and
labels as docs/prometheus.md gives them."""

from __future__ import annotations

import sys

from test_tmux import tmux  # noqa: F401  (the fixture)
from tests_support import free_port, scrape, steps_of, until


def test_scrape_the_exporter_during_a_demo(tmux, tmp_path):  # noqa: F811
    config = tmp_path / "config.toml"
    config.write_text("# defaults only\n")
    port = free_port()
    tmux.type(
        f"{sys.executable} -m gputop demo --board h100x2 --trainer '--workers 1' --interval 1 "
        f"--config {config} --prometheus 127.0.0.1:{port}"
    )
    tmux.wait_for("SIMULATED", timeout=30)

    def counting() -> dict | None:
        fams = scrape(port)
        return fams if steps_of(fams) and "gputop_verdict" in fams else None

    first = steps_of(until(counting, timeout=30, what="steps on /metrics during the demo"))

    def more() -> dict | None:  # still counting while it trains
        fams = scrape(port)
        return fams if sum(steps_of(fams).values()) > sum(first.values()) else None

    again = until(more, timeout=30, what="more steps on /metrics")
    tmux.keys("q")
    tmux.wait_for("READY$", timeout=30)
    assert again is not None
    assert all(again_v >= first.get(rank, 0) for rank, again_v in steps_of(again).items())
    assert sum(steps_of(again).values()) > sum(first.values())  # counting while it trains

    assert all(name.startswith("gputop_") for name in again)
    types = {name: f.type for name, f in again.items()}
    for name in ("gputop_steps", "gputop_step_seconds", "gputop_phase_seconds"):
        assert types[name] == "counter"
        assert all(s.name.endswith("_total") for s in again[name].samples)
    assert types["gputop_step_duration_seconds"] == "histogram"
    assert types["gputop_gpu_power_watts"] == "gauge"
    gpus = {(s.labels["gpu"], s.labels["UUID"]) for s in again["gputop_gpu_power_watts"].samples}
    assert {g for g, _ in gpus} == {"0", "1"} and all(u.startswith("GPU-") for _, u in gpus)
    assert {"rank", "phase"} <= set(again["gputop_phase_seconds"].samples[0].labels)
    phases = {s.labels["phase"] for s in again["gputop_phase_seconds"].samples}
    assert "data_wait" in phases
    states = [s.value for s in again["gputop_verdict"].samples]
    assert states.count(1.0) == 1 and set(states) <= {0.0, 1.0}
    # after gputop quits nothing listens any more (the prompt shows before the process has fully
    # exited)
    until(lambda: scrape(port) is None, timeout=15, what="the port let go")
    assert "Traceback" not in tmux.screen()
