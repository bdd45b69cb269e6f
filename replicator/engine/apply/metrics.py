"""What each applied batch reports: rows per table and seconds per phase.

Plain values; ``format_text``/``format_json`` turn them into one structured log line each
(``--log-format text|json``). The live terminal display lives in ``cli/render.py``.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class TableReport:
    table: str  # source table, db.table
    changes: int  # row changes read for it in the batch
    rows: int = 0  # rows sent to the sink after compaction, mapping and filter
    skipped: bool = False  # the sink had already applied this batch (a replay)
    seconds_decode: float = 0.0
    seconds_transform: float = 0.0  # completing images (compaction is part of stage)
    seconds_stage: float = 0.0
    seconds_merge: float = 0.0
    last_ts_ms: int = 0  # newest source commit time in the batch (0: none, e.g. snapshot)
    unrouted: int = 0  # outbox events no route takes (ignored; reported by the first route)


@dataclass
class BatchReport:
    kind: str  # "stream" | "snapshot"
    batch_id: int  # the sink batch id
    end_offset: dict[str, Any] | None
    tables: list[TableReport] = field(default_factory=list)
    seconds: float = 0.0
    # CPU seconds of this whole process (every thread: DuckDB's too) applying the batch, its
    # Spark read excluded: the driver's share of the CPU budget per change (bench/README.md)
    cpu_seconds: float = 0.0
    finished_at: float = field(default_factory=time.time)
    pipeline: str = ""  # set by the applier, so every log line names its pipeline

    @property
    def last_ts_ms(self) -> int:
        return max((table.last_ts_ms for table in self.tables), default=0)

    @property
    def changes(self) -> int:
        return sum(table.changes for table in self.tables)

    @property
    def rows(self) -> int:
        return sum(table.rows for table in self.tables)


def _position(offset: dict[str, Any] | None) -> str:
    return f"{offset['file']}:{offset['pos']}" if offset else "-"


def format_text(report: BatchReport) -> str:
    """One line per batch, then one per table: ``key=value`` pairs, grep- and awk-friendly."""
    lines = [
        f"{report.kind} pipeline={report.pipeline or '-'} batch={report.batch_id} position={_position(report.end_offset)} "
        f"changes={report.changes} rows={report.rows} seconds={report.seconds:.3f}"
    ]
    for table in report.tables:
        lines.append(
            f"  table={table.table} changes={table.changes} rows={table.rows} "
            f"skipped={str(table.skipped).lower()} decode_s={table.seconds_decode:.3f} "
            f"transform_s={table.seconds_transform:.3f} stage_s={table.seconds_stage:.3f} "
            f"merge_s={table.seconds_merge:.3f}"
            + (f" unrouted={table.unrouted}" if table.unrouted else "")
        )
    return "\n".join(lines)


def format_json(report: BatchReport) -> str:
    """One JSON object per batch: pipeline, kind, batch_id, end_offset, totals, per table."""
    data = asdict(report)
    data["changes"] = report.changes
    data["rows"] = report.rows
    return json.dumps(data, separators=(",", ":"), default=str)
