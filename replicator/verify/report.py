"""What ``verify`` found, as plain data: per table counts, differing keys, lag."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from replicator.verify.normalize import jsonable
from replicator.verify.slice import TableSlice

DifferenceKind = Literal["missing", "extra", "different", "duplicate"]


@dataclass(frozen=True)
class ColumnDifference:
    target_column: str
    source_value: Any  # canonical: the value the target should hold
    target_value: Any


@dataclass(frozen=True)
class KeyDifference:
    """One key whose row differs: ``missing`` in the target, ``extra`` in the target (absent
    or filtered out in the source), ``different`` in the listed columns, or ``duplicate``
    (the target holds the key more than once)."""

    kind: DifferenceKind
    key: dict[str, Any]  # source key column -> canonical value
    columns: tuple[ColumnDifference, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind,
                                "key": {k: jsonable(v) for k, v in self.key.items()}}
        if self.columns:
            data["columns"] = [
                {"column": c.target_column, "source": jsonable(c.source_value),
                 "target": jsonable(c.target_value)}
                for c in self.columns
            ]
        return data

    def describe(self) -> str:
        key = ", ".join(f"{k}={jsonable(v)!r}" for k, v in self.key.items())
        if self.kind == "missing":
            return f"[{key}] missing in target"
        if self.kind == "extra":
            return f"[{key}] extra in target (not in source)"
        if self.kind == "duplicate":
            return f"[{key}] more than once in target"
        changes = "; ".join(
            f"{c.target_column}: source {jsonable(c.source_value)!r} != target "
            f"{jsonable(c.target_value)!r}" for c in self.columns
        )
        return f"[{key}] differs: {changes}"


@dataclass
class Lag:
    """How far the target's applied position is behind the binlog head (None: unknown)."""

    applied: str | None  # end offset of the table's last applied batch, "file:pos"
    head: str | None  # the source's binlog head when verify finished
    lag_bytes: int | None = None
    lag_files: int | None = None

    @property
    def caught_up(self) -> bool:
        return self.lag_bytes == 0 and not self.lag_files


@dataclass
class TableReport:
    source_table: str  # db.table
    target_table: str  # qualified target name
    source_rows: int = 0  # rows in replication scope (row filter applied)
    target_rows: int = 0  # live rows (soft-deleted ones not counted)
    segments: int = 0  # key ranges compared
    differing_segments: int = 0
    differences: list[KeyDifference] = field(default_factory=list)
    seconds: float = 0.0
    rechecks: int = 0  # --wait: rounds of re-checking differing keys
    lag: Lag | None = None
    skipped: str | None = None  # why the table could not be compared (then nothing else is set)
    method: str = "fetch"  # "checksum": range checksums inside both databases; "fetch": rows
    fallback: list[str] = field(default_factory=list)  # why not by checksum
    checksum_queries: int = 0  # range-checksum queries per side
    fetched_rows: int = 0  # rows fetched into verify, both sides together
    slice: TableSlice | None = None  # --where: the condition on each side (None: every row)
    top_ranges: int = 0  # top-level checksum queries per side (sized to query_seconds)
    slowest_query_seconds: float = 0.0  # the longest top-level source checksum query

    @property
    def equal(self) -> bool:
        return not self.differences

    def count(self, kind: DifferenceKind) -> int:
        return sum(1 for d in self.differences if d.kind == kind)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source_table": self.source_table,
            "target_table": self.target_table,
            "equal": self.equal,
            "source_rows": self.source_rows,
            "target_rows": self.target_rows,
            "segments": self.segments,
            "differing_segments": self.differing_segments,
            "missing": self.count("missing"),
            "extra": self.count("extra"),
            "different": self.count("different"),
            "duplicate": self.count("duplicate"),
            "differences": [d.to_dict() for d in self.differences],
            "rechecks": self.rechecks,
            "lag": None if self.lag is None else {
                "applied": self.lag.applied, "head": self.lag.head,
                "lag_bytes": self.lag.lag_bytes, "lag_files": self.lag.lag_files,
            },
            "seconds": round(self.seconds, 3),
            "skipped": self.skipped,
            "method": self.method,
            "fallback": self.fallback,
            "checksum_queries": self.checksum_queries,
            "fetched_rows": self.fetched_rows,
            "slice": None if self.slice is None else self.slice.to_dict(),
            "top_ranges": self.top_ranges,
            "slowest_query_seconds": round(self.slowest_query_seconds, 3),
        }


@dataclass
class VerifyReport:
    pipeline: str
    tables: list[TableReport] = field(default_factory=list)
    # What was asked for: tables (db.table), where, method, max_rows_per_second.
    checked: dict[str, Any] = field(default_factory=dict)

    @property
    def equal(self) -> bool:
        return all(table.equal for table in self.tables)

    def table(self, name: str) -> TableReport:
        wanted = name.lower()
        for table in self.tables:
            names = (table.source_table, table.source_table.split(".", 1)[-1],
                     table.target_table, table.target_table.rsplit(".", 1)[-1])
            if wanted in (n.lower() for n in names):
                return table
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {"pipeline": self.pipeline, "equal": self.equal,
                "tables": [t.to_dict() for t in self.tables], "checked": self.checked}

    def describe(self, limit: int = 20) -> list[str]:
        """Text lines: one summary per table, then up to ``limit`` differing keys each."""
        lines = []
        for table in self.tables:
            if table.skipped:
                lines.append(f"{table.source_table} -> {table.target_table}: not compared: "
                             f"{table.skipped}")
                continue
            how = (f"by checksum ({table.checksum_queries} range queries per side, "
                   f"{table.fetched_rows} rows fetched)" if table.method == "checksum"
                   else "by fetching every row")
            sliced = f" (rows where {table.slice.where})" if table.slice else ""
            head = (f"{table.source_table} -> {table.target_table}{sliced}: source "
                    f"{table.source_rows} "
                    f"rows, target {table.target_rows} rows, {table.segments} key range(s) "
                    f"{how}, {table.seconds:.2f}s")
            if table.method == "fetch" and table.fallback:
                head += " (not by checksum: " + "; ".join(table.fallback) + ")"
            if table.equal:
                lines.append(f"{head}: equal")
                continue
            lines.append(
                f"{head}: {table.count('missing')} missing, {table.count('extra')} extra, "
                f"{table.count('different')} different"
                + (f", {table.count('duplicate')} duplicate" if table.count("duplicate") else "")
            )
            lines.extend("  " + d.describe() for d in table.differences[:limit])
            if len(table.differences) > limit:
                lines.append(f"  ... and {len(table.differences) - limit} more "
                             "(--format json lists them all)")
            if table.lag is not None:
                if table.lag.caught_up:
                    lines.append(f"  the target has applied the binlog up to the head "
                                 f"({table.lag.head}): these differences are not lag")
                else:
                    behind = (f"{table.lag.lag_bytes} bytes" if table.lag.lag_bytes is not None
                              else "an unknown number of bytes")
                    lines.append(
                        f"  replication lag: applied up to {table.lag.applied or 'nothing'}, "
                        f"binlog head {table.lag.head} ({behind} behind): differences may be "
                        "changes not replicated yet (--wait SECONDS re-checks them)"
                    )
        return lines
