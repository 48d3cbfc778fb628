"""`gputop fleet`'s pure parts: the node rows from query results (the slow node first, by the
alert rule's measure), the API answer's parsing (anything crafted is one line), the queries'
quoting, and that the rules file records the very expressions the command asks."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from gputop import schemas
from gputop.fleet.client import FleetError, Sample, parse
from gputop.fleet.nodes import SLOW_NODE, as_json, fleet_document, node_rows, text_lines
from gputop.fleet.queries import QUERIES, rank_work, selector
from gputop.vocab.budget import LOSSES

REPO = Path(__file__).resolve().parents[3]
FLEET_RULES = REPO / "deploy" / "prometheus" / "gputop-fleet.yml"
DASHBOARD = REPO / "deploy" / "grafana" / "gputop-dcgm.json"


def s(value: float, **labels: str) -> Sample:
    return Sample({"training_job": "llama", **labels}, value)


def three_nodes(slow: float = 1.3) -> dict[str, list[Sample]]:
    work = [
        s(0.10 * (slow if n == 3 else 1.0), instance=f"node-{n}", rank=str(2 * (n - 1) + r))
        for n in (1, 2, 3)
        for r in (0, 1)
    ]
    return {
        "work": work,
        "verdict": [s(1, instance="node-3", bound="throttled-power")],
        "shares": [
            s(0.6, instance="node-3", slice="compute"),
            s(0.3, instance="node-3", slice="comms"),
            s(0.1, instance="node-3", slice="data"),
        ],
        "stuck": [],
        "throttled": [s(1, instance="node-3", gpu="0", reason="sw_power_cap")],
    }


def test_the_slow_node_comes_first_with_its_evidence():
    rows = node_rows(three_nodes())
    assert [r.instance for r in rows] == ["node-3", "node-1", "node-2"]
    top = rows[0]
    assert top.slow and top.ratio == pytest.approx(1.3 / 1.0)
    assert top.verdict == "throttled-power"
    assert top.biggest_loss == ("comms", 0.3)  # compute is no loss
    assert top.throttled_gpus == ("0",)
    assert not any(r.slow for r in rows[1:])
    assert "SLOW node-3" in text_lines(rows)[0]
    assert json.loads(json.dumps(as_json(rows)))[0]["slow"] is True


def document(rows) -> dict:
    doc = fleet_document(rows, "http://prom:9090", "llama", "2026-11-26T12:00:00+00:00", "0.1.0")
    return json.loads(json.dumps(doc))


def test_the_json_document_follows_its_schema_and_a_crafted_one_does_not():
    schema = schemas.load("fleet")
    doc = document(node_rows(three_nodes()))
    jsonschema.validate(doc, schema)
    assert doc["nodes"][0]["slow"] and doc["slow_bar"] == SLOW_NODE
    jsonschema.validate(document([]), schema)  # Prometheus with no gputop series
    bad = document(node_rows(three_nodes()))
    bad["nodes"][0]["biggest_loss"]["slice"] = "compute"  # compute is no loss
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
    del bad["nodes"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_the_schemas_loss_slices_are_the_budgets():
    node = schemas.load("fleet")["$defs"]["node"]["properties"]
    shapes = node["biggest_loss"]["oneOf"]
    enum = next(x for x in shapes if x.get("type") == "object")["properties"]["slice"]["enum"]
    assert enum == list(LOSSES)


def test_equal_nodes_have_no_slow_node():
    assert not any(r.slow for r in node_rows(three_nodes(slow=1.0)))


def test_the_slow_bar_is_the_alert_rules():
    assert f"gputop:node_work_ratio > {SLOW_NODE:g}" in FLEET_RULES.read_text()


def test_the_dashboard_turns_a_node_red_at_the_slow_bar():
    panels = json.loads(DASHBOARD.read_text())["panels"]
    gauge = next(p for p in panels if "gputop:node_work_ratio" in str(p.get("targets")))
    steps = gauge["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert [s["value"] for s in steps if s["color"] == "red"] == [SLOW_NODE]


def test_the_rules_record_the_commands_work_expression():
    """One measure: the recording rule's expression is the command's, whitespace aside."""
    text = FLEET_RULES.read_text()
    block = text.split("- record: gputop:rank_work_seconds_per_step")[1].split("- record:")[0]
    code = "\n".join(line.split("#")[0] for line in block.split("expr: |", 1)[1].splitlines())
    rule = re.sub(r"\s+", "", code)
    assert rule == re.sub(r"\s+", "", rank_work(None).replace("{}", ""))


def test_a_job_name_is_quoted_as_promql_reads_it():
    assert selector('a"b\\c') == '{training_job="a\\"b\\\\c"}'
    for make in QUERIES.values():
        assert 'training_job="x"' in make("x")


@pytest.mark.parametrize(
    "raw",
    [
        b"<html>not json",
        b'{"status": "error", "error": "parse error at char 3"}',
        b'{"status": "success", "data": {"resultType": "matrix", "result": []}}',
        b"[1, 2]",
        b"\xff\xfe",
    ],
)
def test_an_answer_that_is_not_an_instant_vector_is_one_line(raw):
    with pytest.raises(FleetError) as e:
        parse(raw, "http://prom:9090")
    assert "\n" not in str(e.value)


def test_malformed_series_are_dropped_not_raised():
    doc = {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [
                {"metric": {"instance": "a"}, "value": [1, "0.5"]},
                {"metric": {"instance": "b"}, "value": [1, "NaN"]},
                {"metric": "x", "value": [1, "1"]},
                {"metric": {"instance": "c"}, "value": [1]},
                {"metric": {"instance": "d"}, "value": [1, "abc"]},
                7,
            ],
        },
    }
    assert parse(json.dumps(doc).encode(), "p") == [Sample({"instance": "a"}, 0.5)]
