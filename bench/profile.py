"""Where the pipeline's CPU goes, measured without Spark on the same binlog range.

The engine's executor side is ``read_changes`` -> ``change_rows`` (row images to exact JSON
text) -> ``arrow_batches`` (columnar hand-off to Spark); its driver side turns the rows back
into ``ChangeEvent``s (``event_from_row``), compacts them and stages Arrow for the sink. Run
here in one process, stage by stage, the differences between the cumulative rates say what
each stage costs per row, and a cProfile of the whole chain (first ``limit`` changes) names
the functions. This is the "profile" behind the e2e figures: ``spark_read`` in the e2e split
is the executor side plus Spark's transport, ``decode``/``transform``/``stage`` the driver's.
"""

from __future__ import annotations

import cProfile
import io
import pstats
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


def _rows(events: Iterable[Any], database: str) -> Iterator[dict[str, Any]]:
    from replicator.engine.datasource import change_rows

    return change_rows(iter(events), {f"{database}.{spec.name}": [spec.key] for spec in TABLES})


def _consume_batches(batches: Iterable[Any], limit: int | None = None) -> int:
    rows = 0
    for batch in batches:
        rows += batch.num_rows
        if limit is not None and rows >= limit:
            break
    return rows


def _driver_side(batches: list[Any], max_rows: int = 50_000) -> int:
    """Driver, per micro-batch of ~``max_rows``: Arrow -> rows -> ChangeEvents -> compaction."""
    import pyarrow as pa

    from replicator.engine.transform import event_from_row
    from replicator.model.compaction import compact

    done = 0
    group: list[Any] = []

    def apply(group: list[Any]) -> int:
        rows = pa.Table.from_batches(group).to_pylist()
        rows.sort(key=lambda row: (row["file_seq"], row["pos"], row["row_index"]))
        by_table: dict[str, list[Any]] = {}
        for row in rows:
            by_table.setdefault(row["table"], []).append(event_from_row(row))
        for events in by_table.values():
            compact(events, ["id"])
        return len(rows)

    for batch in batches:
        group.append(batch)
        if sum(b.num_rows for b in group) >= max_rows:
            done += apply(group)
            group = []
    if group:
        done += apply(group)
    return done


def run_profile(source: MySQLSource, start: BinlogPosition, end: BinlogPosition, *,
                database: str, server_ids: Iterator[int], limit: int = 50_000) -> dict[str, Any]:
    import pyarrow  # noqa: F401  (imported before the clocks start: ~0.5 s once)

    from replicator.engine.datasource import arrow_batches

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
    timed("read_changes+change_rows", lambda: sum(
        1 for _ in _rows(_events(source, start, end, tables, next(server_ids)), database)))
    batches: list[Any] = []

    def executor_side() -> int:
        batches.extend(arrow_batches(_rows(_events(source, start, end, tables,
                                                   next(server_ids)), database)))
        return sum(batch.num_rows for batch in batches)

    timed("executor_side (+arrow_batches)", executor_side)
    timed("driver_side (to_pylist, event_from_row, compact)", lambda: _driver_side(batches))
    batches.clear()
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
    _consume_batches(arrow_batches(_rows(_events(source, start, end, tables, next(server_ids)),
                                         database)), limit)
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(15)
    top = [line.strip() for line in text.getvalue().splitlines()
           if line.strip() and line.strip()[0].isdigit()][:15]
    return {"stages": stages, "added_us_per_row": per_row,
            "executor_side_top_functions_by_tottime": top, "profiled_changes": limit}
