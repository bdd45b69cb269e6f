"""Prometheus metrics of a running pipeline, per pipeline and table, via ``prometheus_client``.

Exposed two ways, both optional (``replicator run --metrics-file / --metrics-port``):

- a text file in the exposition format, rewritten atomically after every batch
  (``write_to_textfile``) — what node_exporter's textfile collector and most agents read;
- an HTTP endpoint ``/metrics`` (``start_http_server``, a daemon thread).

The counters are kept here and exposed by a custom collector (the client library's pattern
for state owned elsewhere), in a registry of this pipeline's own, with the library's process
and platform collectors (``process_cpu_seconds_total``, ``process_resident_memory_bytes``,
``python_info`` ...) beside them. The dashboard in docs/grafana-dashboard.json queries these.

Lag is measured two ways: seconds since the commit of the newest change applied (what an
on-call engineer asks), and bytes/files of binlog between the applied position and the head
(what predicts how long catching up takes; it costs a ``SHOW BINARY LOGS``, so the head is
read at most every ``head_interval_s``).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
    start_http_server,
    write_to_textfile,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from replicator.engine.apply.metrics import BatchReport
from replicator.model.changes import BinlogPosition

PHASES = ("decode", "transform", "stage", "merge")


@dataclass
class _TableCounters:
    changes: int = 0
    rows: int = 0
    batches: int = 0
    skipped: int = 0
    unrouted: int = 0  # outbox events no route takes
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))


class PipelineMetrics:
    """Counters fed by ``observe(report)`` after each batch; ``render()`` gives the text."""

    def __init__(
        self,
        pipeline: str,
        *,
        head: Callable[[], BinlogPosition] | None = None,
        lag_bytes: Callable[[BinlogPosition, BinlogPosition], int | None] | None = None,
        retention_left: Callable[[BinlogPosition], float | None] | None = None,
        head_interval_s: float = 5.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.pipeline = pipeline
        self.file: Path | None = None  # where `replicator run --metrics-file` writes it
        self._head = head
        self._lag_bytes = lag_bytes
        self._retention_left = retention_left
        self._head_interval_s = head_interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._tables: dict[str, _TableCounters] = defaultdict(_TableCounters)
        self._batches: dict[str, int] = defaultdict(int)  # by kind: stream | snapshot
        self._batch_seconds_sum = 0.0
        # Both kinds exist from the start, so rate() and alerts see a 0, not a missing series.
        self._errors: dict[str, int] = defaultdict(int, {"transient": 0, "fatal": 0})
        self._last_ts_ms = 0
        self._last_batch_at = 0.0
        self._position: BinlogPosition | None = None
        self._head_position: BinlogPosition | None = None
        self._head_read_at = float("-inf")
        self._lag: int | None = None
        self._retention: float | None = None
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(self)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)

    # -- feeding ---------------------------------------------------------------------------

    def observe(self, report: BatchReport) -> None:
        with self._lock:
            self._batches[report.kind] += 1
            self._batch_seconds_sum += report.seconds
            self._last_batch_at = report.finished_at
            for table in report.tables:
                counters = self._tables[table.table]
                counters.changes += table.changes
                counters.rows += table.rows
                counters.batches += 1
                counters.skipped += int(table.skipped)
                counters.unrouted += table.unrouted
                counters.seconds["decode"] += table.seconds_decode
                counters.seconds["transform"] += table.seconds_transform
                counters.seconds["stage"] += table.seconds_stage
                counters.seconds["merge"] += table.seconds_merge
            if report.kind == "stream":
                self._last_ts_ms = max(self._last_ts_ms, report.last_ts_ms)
                if report.end_offset:
                    self._position = BinlogPosition.from_offset(report.end_offset)
        self._refresh_lag()

    def error(self, kind: str) -> None:
        """Count an error by kind: transient (retried) or fatal."""
        with self._lock:
            self._errors[kind] += 1

    def _refresh_lag(self) -> None:
        if self._head is None or self._position is None:
            return
        now = self._clock()
        if now - self._head_read_at < self._head_interval_s:
            return
        self._head_read_at = now
        try:
            head = self._head()
            lag = self._lag_bytes(self._position, head) if self._lag_bytes else None
            left = self._retention_left(self._position) if self._retention_left else None
        except Exception:  # metrics must never stop replication; the run reports source errors
            self.error("metrics")
            return
        with self._lock:
            self._head_position, self._lag, self._retention = head, lag, left

    # -- exposition ------------------------------------------------------------------------

    def describe(self) -> list[Metric]:
        return []  # families depend on what was observed; collect() is the truth

    def collect(self) -> Iterator[Metric]:
        """The pipeline's families (called by the registry on every scrape and file write)."""
        # An idle source runs no batch: the scrape reads the head (at most every interval),
        # so the lag follows a head that moved, or stays 0 while nothing does.
        self._refresh_lag()
        with self._lock:
            yield from self._table_families(sorted(self._tables.items()))
            yield from self._run_families()
            yield from self._lag_gauges()

    def _table_families(self, tables: list[tuple[str, Any]]) -> Iterator[Metric]:
        """The counters per table (``tables``: name and counters, sorted)."""
        pipeline = self.pipeline

        def per_table(name: str, help_text: str, attr: str) -> Metric:
            family = CounterMetricFamily(name, help_text, labels=["pipeline", "table"])
            for table, counters in tables:
                family.add_metric([pipeline, table], getattr(counters, attr))
            return family

        yield per_table("replicator_changes_read_total",
                        "Row changes read from the binlog (or the snapshot) per table.",
                        "changes")
        yield per_table("replicator_rows_applied_total",
                        "Rows merged into the target per table, after compaction and "
                        "filters.", "rows")
        yield per_table("replicator_table_batches_total",
                        "Batches that carried changes of the table.", "batches")
        yield per_table("replicator_table_batches_skipped_total",
                        "Batches skipped because the target already had them (replays).",
                        "skipped")
        if any(counters.unrouted for _, counters in tables):
            outbox = CounterMetricFamily(
                "replicator_outbox_unrouted_total",
                "Outbox events whose type no route takes (ignored), per outbox.",
                labels=["pipeline", "table"])
            for table, counters in tables:
                if counters.unrouted:
                    outbox.add_metric([pipeline, table], counters.unrouted)
            yield outbox
        phases = CounterMetricFamily("replicator_phase_seconds_total",
                                     "Seconds spent per phase of applying batches, per "
                                     "table.", labels=["pipeline", "table", "phase"])
        for table, counters in tables:
            for phase in PHASES:
                phases.add_metric([pipeline, table, phase], counters.seconds[phase])
        yield phases

    def _run_families(self) -> Iterator[Metric]:
        """The counters of the whole run: batches, their seconds, errors, the last batch."""
        pipeline = self.pipeline
        batches = CounterMetricFamily("replicator_batches_total", "Batches applied, by kind.",
                                      labels=["pipeline", "kind"])
        for kind, count in sorted(self._batches.items()):
            batches.add_metric([pipeline, kind], count)
        yield batches
        batch_seconds = CounterMetricFamily("replicator_batch_seconds_total",
                                            "Wall seconds spent applying batches.",
                                            labels=["pipeline"])
        batch_seconds.add_metric([pipeline], self._batch_seconds_sum)
        yield batch_seconds
        errors = CounterMetricFamily("replicator_errors_total",
                                     "Errors by kind (transient, fatal, metrics).",
                                     labels=["pipeline", "kind"])
        for kind, count in sorted(self._errors.items()):
            errors.add_metric([pipeline, kind], count)
        yield errors
        yield _gauge("replicator_last_batch_timestamp_seconds",
                     "Unix time the last batch was applied.", pipeline, self._last_batch_at)

    def _lag_gauges(self) -> Iterator[Metric]:
        """How far behind the source: seconds, bytes, files, and the binlog's retention."""
        pipeline = self.pipeline
        lag_help = ("Seconds behind the source: 0 when applied up to the binlog head, "
                    "else since the commit of the newest change applied.")
        if self._lag == 0:
            # Applied up to the head: nothing is waiting, however long the source has
            # been idle (the age of the newest change would climb and page someone).
            yield _gauge("replicator_lag_seconds", lag_help, pipeline, 0.0)
        elif self._last_ts_ms:
            yield _gauge("replicator_lag_seconds", lag_help, pipeline,
                         max(0.0, self._clock() - self._last_ts_ms / 1000))
        if self._lag is not None:
            yield _gauge("replicator_lag_bytes",
                         "Bytes of binlog between the applied position and the head.",
                         pipeline, self._lag)
        if self._retention is not None:
            yield _gauge("replicator_binlog_retention_seconds",
                         "Seconds until the server may purge the binlog file the pipeline "
                         "still needs (absent: no age limit, or the file is being written).",
                         pipeline, self._retention)
        if self._position is not None and self._head_position is not None:
            yield _gauge("replicator_lag_files",
                         "Binlog files between the applied position and the head.", pipeline,
                         self._head_position.sequence - self._position.sequence)

    def render(self) -> str:
        """The exposition text of this pipeline's registry (what a scrape returns)."""
        return generate_latest(self.registry).decode()

    def write_file(self, path: str | Path) -> None:
        """Rewrite ``path`` atomically (``write_textfile``)."""
        write_textfile(path, self.registry)

    def serve(self, port: int, host: str = "127.0.0.1") -> Any:
        """Serve ``/metrics`` on a daemon thread; returns the server (``.shutdown()``)."""
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        return server


def write_textfile(path: str | Path, registry: CollectorRegistry) -> None:
    """Rewrite ``path`` atomically (the client writes a temporary file and renames it),
    readable by its user only: it names the pipeline's tables (docs/running.md, files and
    permissions). The client creates the file with the process umask, so that umask is
    tightened around the write (``replicator run`` already runs under 077). Also
    ``verify --metrics-file``'s writer."""
    import os

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    previous = os.umask(0o077)
    try:
        write_to_textfile(str(target), registry)
    finally:
        os.umask(previous)


def _gauge(name: str, help_text: str, pipeline: str, value: float) -> Metric:
    family = GaugeMetricFamily(name, help_text, labels=["pipeline"])
    family.add_metric([pipeline], value)
    return family
