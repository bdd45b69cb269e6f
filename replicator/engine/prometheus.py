"""Prometheus metrics of a running pipeline, per pipeline and table.

Exposed two ways, both optional (``replicator run --metrics-file / --metrics-port``):

- a text file in the exposition format, rewritten atomically after every batch — what
  node_exporter's textfile collector and most agents read;
- an HTTP endpoint ``/metrics`` served by a daemon thread (stdlib only: no client library to
  install on the cluster).

Lag is measured two ways: seconds since the commit of the newest change applied (what an
on-call engineer asks), and bytes/files of binlog between the applied position and the head
(what predicts how long catching up takes; it costs a ``SHOW BINARY LOGS``, so the head is
read at most every ``head_interval_s``).
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replicator.engine.metrics import BatchReport
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


def _escape(value: str) -> str:
    """A label value in the exposition format (backslash, quote and newline escaped)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class PipelineMetrics:
    """Counters fed by ``observe(report)`` after each batch; ``render()`` gives the text."""

    def __init__(
        self,
        pipeline: str,
        *,
        head: Callable[[], BinlogPosition] | None = None,
        lag_bytes: Callable[[BinlogPosition, BinlogPosition], int | None] | None = None,
        head_interval_s: float = 5.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.pipeline = pipeline
        self.file: Path | None = None  # where `replicator run --metrics-file` writes it
        self._head = head
        self._lag_bytes = lag_bytes
        self._head_interval_s = head_interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._tables: dict[str, _TableCounters] = defaultdict(_TableCounters)
        self._batches: dict[str, int] = defaultdict(int)  # by kind: stream | snapshot
        self._batch_seconds_sum = 0.0
        self._errors: dict[str, int] = defaultdict(int)
        self._last_ts_ms = 0
        self._last_batch_at = 0.0
        self._position: BinlogPosition | None = None
        self._head_position: BinlogPosition | None = None
        self._head_read_at = float("-inf")
        self._lag: int | None = None

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
        except Exception:  # metrics must never stop replication; the run reports source errors
            self.error("metrics")
            return
        with self._lock:
            self._head_position, self._lag = head, lag

    # -- exposition ------------------------------------------------------------------------

    def render(self) -> str:
        p = f'pipeline="{_escape(self.pipeline)}"'
        out: list[str] = []

        def metric(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> None:
            out.append(f"# HELP {name} {help_text}")
            out.append(f"# TYPE {name} {kind}")
            for labels, value in samples:
                out.append(f"{name}{{{labels}}} {value:.6g}" if isinstance(value, float)
                           else f"{name}{{{labels}}} {value}")

        with self._lock:
            tables = sorted(self._tables.items())

            def per_table(attr: str) -> list[tuple[str, float]]:
                return [(f'{p},table="{_escape(t)}"', getattr(c, attr)) for t, c in tables]

            metric("replicator_changes_read_total", "counter",
                   "Row changes read from the binlog (or the snapshot) per table.",
                   per_table("changes"))
            metric("replicator_rows_applied_total", "counter",
                   "Rows merged into the target per table, after compaction and filters.",
                   per_table("rows"))
            metric("replicator_table_batches_total", "counter",
                   "Batches that carried changes of the table.", per_table("batches"))
            metric("replicator_table_batches_skipped_total", "counter",
                   "Batches skipped because the target already had them (replays).",
                   per_table("skipped"))
            outboxes = [(f'{p},table="{_escape(t)}"', c.unrouted) for t, c in tables
                         if c.unrouted]
            if outboxes:
                metric("replicator_outbox_unrouted_total", "counter",
                       "Outbox events whose type no route takes (ignored), per outbox.",
                       outboxes)
            metric("replicator_phase_seconds_total", "counter",
                   "Seconds spent per phase of applying batches, per table.",
                   [(f'{p},table="{_escape(t)}",phase="{phase}"', c.seconds[phase])
                    for t, c in tables for phase in PHASES])
            metric("replicator_batches_total", "counter", "Batches applied, by kind.",
                   [(f'{p},kind="{kind}"', n) for kind, n in sorted(self._batches.items())])
            metric("replicator_batch_seconds_total", "counter",
                   "Wall seconds spent applying batches.", [(p, self._batch_seconds_sum)])
            metric("replicator_errors_total", "counter", "Errors by kind (transient, fatal).",
                   [(f'{p},kind="{kind}"', n) for kind, n in sorted(self._errors.items())])
            metric("replicator_last_batch_timestamp_seconds", "gauge",
                   "Unix time the last batch was applied.", [(p, self._last_batch_at)])
            if self._last_ts_ms:
                lag_s = max(0.0, self._clock() - self._last_ts_ms / 1000)
                metric("replicator_lag_seconds", "gauge",
                       "Seconds since the commit of the newest change applied.", [(p, lag_s)])
            if self._lag is not None:
                metric("replicator_lag_bytes", "gauge",
                       "Bytes of binlog between the applied position and the head.",
                       [(p, self._lag)])
            if self._position is not None and self._head_position is not None:
                metric("replicator_lag_files", "gauge",
                       "Binlog files between the applied position and the head.",
                       [(p, self._head_position.sequence - self._position.sequence)])
        return "\n".join(out) + "\n"

    def write_file(self, path: str | Path) -> None:
        """Rewrite ``path`` atomically (a reader never sees half a file)."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(self.render())
            os.replace(temp, target)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise

    def serve(self, port: int, host: str = "127.0.0.1") -> Any:
        """Serve ``/metrics`` on a daemon thread; returns the server (``.shutdown()``)."""
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        metrics = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # the stdlib calls it by this name
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404)
                    return
                body = metrics.render().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:  # scrapes are not log lines
                return

        server = ThreadingHTTPServer((host, port), Handler)
        threading.Thread(target=server.serve_forever, name="replicator-metrics",
                         daemon=True).start()
        return server
