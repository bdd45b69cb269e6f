"""Where the pipeline's CPU goes, measured without Spark on the same binlog range.

The engine's executor side is ``read_change_batches`` (the fast decoder filling typed Arrow
change batches) -> ``land_range`` (those batches as Parquet files in the landing zone, one
manifest row per file); its driver side reads each table's files back (``read_files``) and
stages them (``replicator.transform.stage_batch``, measured by the e2e split). Run here in
one process, stage by stage, the differences between the cumulative rates say what each
stage costs per row, and a cProfile of the decoder (first ``limit`` changes) names the
functions. ``read_changes`` (ChangeEvents, the reader before the change batches) is the
reference line.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import tempfile
import time
from collections.abc import Iterable, Iterator
from typing import Any

from bench.tables import TABLES
from replicator.model.changes import BinlogPosition
from replicator.model.pipeline import MySQLSource


def _events(source: MySQLSource, start: BinlogPosition, end: BinlogPosition, tables: list[str],
            server_id: int) -> Iterator[Any]:
    from replicator.source.binlog import read_changes

    return read_changes(source, start=start, end=end, tables=tables, server_id=server_id)


def _chunks(source: MySQLSource, start: BinlogPosition, end: BinlogPosition,
            tables: list[str], server_id: int) -> Iterator[Any]:
    from replicator.source.fast.columnar import TableChunk, read_change_batches

    return (item.data for item in read_change_batches(source, start=start, end=end,
                                                      tables=tables, server_id=server_id)
            if isinstance(item, TableChunk))


def _consume_batches(batches: Iterable[Any], limit: int | None = None) -> int:
    rows = 0
    for batch in batches:
        rows += batch.num_rows
        if limit is not None and rows >= limit:
            break
    return rows


def run_profile(source: MySQLSource, start: BinlogPosition, end: BinlogPosition, *,
                database: str, server_ids: Iterator[int], limit: int = 50_000) -> dict[str, Any]:
    import pyarrow  # noqa: F401  (imported before the clocks start: ~0.5 s once)

    from replicator.engine.job.landing import land_range, read_files
    from replicator.model.selection import TableSelector
    from replicator.source.fast.columnar import KeyColumns

    tables = [f"{database}.{spec.name}" for spec in TABLES]
    stages: dict[str, Any] = {}

    def timed(name: str, run: Any) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        rows = run()
        seconds = time.perf_counter() - wall
        stages[name] = {"rows": rows, "seconds": round(seconds, 3),
                        "cpu_seconds": round(time.process_time() - cpu, 3),
                        "rows_per_s": round(rows / seconds, 1) if seconds else None}

    timed("read_changes", lambda: sum(1 for _ in _events(source, start, end, tables,
                                                          next(server_ids))))
    timed("read_change_batches", lambda: _consume_batches(
        _chunks(source, start, end, tables, next(server_ids))))
    manifest: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-profile-") as root:

        def executor_side() -> int:
            manifest.extend(land_range(
                source, start=start, end=end, tables=TableSelector.of(tables),
                keys=KeyColumns({t: [spec.key] for t, spec in zip(tables, TABLES, strict=True)}),
                server_id=next(server_ids), root=root, epoch=0, part=0))
            return sum(int(row["rows"]) for row in manifest if row["kind"] == "rows")

        def driver_read() -> int:
            by_table: dict[str, list[str]] = {}
            for row in manifest:
                if row["kind"] == "rows":
                    by_table.setdefault(row["table"], []).append(row["path"])
            return sum(read_files(paths, root, sort=False).num_rows
                       for paths in by_table.values())

        timed("executor_side (+land_range: Parquet files)", executor_side)
        timed("driver_side (read_files)", driver_read)
    # per-row microseconds each stage adds, from the differences of cumulative times
    per_row: dict[str, float] = {}
    previous = 0.0
    for name, stage in stages.items():
        rows = stage["rows"] or 1
        cost = stage["seconds"] / rows * 1e6
        if name.startswith("driver_side"):
            per_row[name] = round(cost, 2)
        else:
            per_row[name] = round(cost - previous, 2)
            previous = cost
    profiler = cProfile.Profile()
    profiler.enable()
    _consume_batches(_chunks(source, start, end, tables, next(server_ids)), limit)
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(15)
    top = [line.strip() for line in text.getvalue().splitlines()
           if line.strip() and line.strip()[0].isdigit()][:15]
    return {"stages": stages, "added_us_per_row": per_row,
            "executor_side_top_functions_by_tottime": top, "profiled_changes": limit}
