"""``verify --metrics-file``: what one verify found, as Prometheus gauges.

- ``replicator_verify_differences{pipeline,table,kind}``: the differing keys per compared
  table (``db.table``, the ``table`` label of ``replicator run``'s metrics) and kind
  (``missing``, ``extra``, ``different``, ``duplicate``), every kind written, 0 included,
  so an alert sees a 0 rather than a missing series;
- ``replicator_verify_last_success_timestamp_seconds{pipeline}``: when this verify finished
  comparing (whatever it found). A verify that could not compare (exit 2) writes no file,
  so this stops moving: the alert on its age catches a verify that no longer runs.

The families come from a collector over the report, in a registry of their own (no
process metrics: verify is a short job, as node_exporter's textfile collector expects).
The CLI writes the registry with ``replicator run``'s writer
(``engine.apply.prometheus.write_textfile``): verify sits below the engine in the import layers
(the engine's re-copy uses verify's comparison), so the writer is called from the CLI.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily

from replicator.verify.report import VerifyReport

KINDS = ("missing", "extra", "different", "duplicate")


class VerifyCollector:
    """The gauges of one finished verify (a custom collector: the state is the report)."""

    def __init__(self, report: VerifyReport, finished_at: float) -> None:
        self.report = report
        self.finished_at = finished_at

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        pipeline = self.report.pipeline
        differences = GaugeMetricFamily(
            "replicator_verify_differences",
            "Keys that differ between source and target in the last verify, per table and "
            "kind (missing, extra, different, duplicate).",
            labels=["pipeline", "table", "kind"])
        for table in self.report.tables:
            if table.skipped:
                continue
            for kind in KINDS:
                differences.add_metric([pipeline, table.source_table, kind], table.count(kind))
        yield differences
        success = GaugeMetricFamily(
            "replicator_verify_last_success_timestamp_seconds",
            "Unix time the last verify finished comparing (equal or not).",
            labels=["pipeline"])
        success.add_metric([pipeline], self.finished_at)
        yield success


def verify_registry(report: VerifyReport, finished_at: float) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(VerifyCollector(report, finished_at))
    return registry
