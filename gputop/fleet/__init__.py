"""`gputop fleet`: every node of a training job, read from Prometheus (never from the nodes):
``queries`` (the PromQL, the same as deploy/prometheus/gputop-fleet.yml's), ``client`` (the
HTTP API, bounded), ``nodes`` (pure: one row per node, the slow node first)."""
