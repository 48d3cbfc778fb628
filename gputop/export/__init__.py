"""Where a live session's readings are offered to other tools: the Prometheus exporter."""

from gputop.export.prometheus import ExportError, PrometheusSink, open_exporter, parse_listen

__all__ = ["ExportError", "PrometheusSink", "open_exporter", "parse_listen"]
