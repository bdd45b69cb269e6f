"""The snapshot of a table whose filter keeps ~10% of its rows, with and without pushdown.

Issue 17's figure: where the filter's part MySQL decides exactly is pushed into the chunk
SELECT (``plan.pushdown``), filtered-out rows are never read. The same 1M-row
``bench_snapshot.orders`` (``bench.snapshot``) is copied twice, each with a fresh checkpoint
and target, with ``--master local[2]``:

- ``pushed``: ``filter: customer_id < 10000`` (``customer_id`` is ``seq MOD 100000``: 10% of
  the rows), pushed down as ``(`customer_id` < 10000)``;
- ``not_pushed``: ``filter: customer_id + 0 < 10000``: the same rows, but arithmetic is not
  pushed down, so every row is read and the transform step drops 90% of them (as every
  filter was run before this change).

Reported per run: the snapshot window's seconds (the "snapshot of" notice -> the last
snapshot batch line), the table's rows per second of that window (source rows covered, the
figure: both runs cover the whole table), the rows staged, the rows in the target, and the
wall time of the whole run (JVM start-up included).

``reader``: the chunk reads alone, in this process (no Spark, no apply): every chunk of the
table (``plan_chunks``, 20k rows) read with ``read_chunk_batches`` with and without the
pushed-down predicate, alternating, ``READER_ROUNDS`` rounds; the best round of each (the
machine is shared). This is the part pushdown changes; the runs above add Spark's scheduling
and the apply, the same for both but for the rows staged.
"""

from __future__ import annotations

from typing import Any

from bench.context import BenchContext, replicator_command
from bench.e2e import RUN_TIMEOUT_S, batch_reports, duckdb_counts, notices
from bench.pipelines import write_pipeline
from bench.procmon import run_monitored
from bench.snapshot import DATABASE, ORDERS

FILTERS = {"pushed": "customer_id < 10000", "not_pushed": "customer_id + 0 < 10000"}


def run_pushdown(ctx: BenchContext, rows: int) -> dict[str, Any]:
    """Both runs over the table ``bench.snapshot.fill_table`` filled with ``rows`` rows."""
    result: dict[str, Any] = {"rows": rows, "filters": dict(FILTERS), "master": "local[2]"}
    for label, text in FILTERS.items():
        result[label] = _copy(ctx, rows, f"bench-pushdown-{label.replace('_', '-')}", text)
    pushed, full = result["pushed"].get("rows_per_s"), result["not_pushed"].get("rows_per_s")
    result["speedup"] = round(pushed / full, 2) if pushed and full else None
    result["reader"] = _reader(ctx, rows)
    return result


READER_ROUNDS = 3


def _reader(ctx: BenchContext, rows: int) -> dict[str, Any]:
    import time

    from replicator.engine.snapshot import CHUNK_ROWS
    from replicator.model.changes import BinlogPosition
    from replicator.plan.pushdown import pushdown
    from replicator.source.catalog import read_catalog
    from replicator.source.snapshot import plan_chunks, read_chunk_batches

    source = ctx.source()
    table = read_catalog(source, [(DATABASE, ORDERS.name)]).tables[0]
    chunks = plan_chunks(source, table, chunk_rows=CHUNK_ROWS)
    inputs = {"customer_id": _spark_type(table)}
    tree = pushdown(FILTERS["pushed"], inputs, table.columns)
    predicates = {"pushed": tree.sql(dialect="mysql"), "not_pushed": None}
    position = BinlogPosition("mysql-bin.000001", 4)
    best: dict[str, float] = {}
    read: dict[str, int] = {}
    for _ in range(READER_ROUNDS):
        for label, predicate in predicates.items():
            started = time.perf_counter()
            read[label] = sum(batch.num_rows for chunk in chunks for batch in read_chunk_batches(
                source, table, chunk, position=position, predicate=predicate))
            best[label] = min(best.get(label, float("inf")), time.perf_counter() - started)
    return {
        "chunks": len(chunks), "rounds": READER_ROUNDS, "predicate": predicates["pushed"],
        **{label: {"seconds": round(best[label], 3), "rows_read": read[label],
                   "table_rows_per_s": round(rows / best[label], 1)} for label in predicates},
        "speedup": round(best["not_pushed"] / best["pushed"], 2),
    }


def _spark_type(table: Any) -> Any:
    from replicator.plan.expressions.spark_types import spark_type_of

    column = table.column("customer_id")
    return spark_type_of(column.mysql_type)


def _copy(ctx: BenchContext, rows: int, name: str, row_filter: str) -> dict[str, Any]:
    pipeline = write_pipeline(
        ctx.workdir / f"{name}.yaml", name=name, database=DATABASE, tables=(ORDERS,),
        target="duckdb", start="initial", server_id=ctx.next_server_id(),
        row_filter=row_filter)
    outcome = run_monitored(
        [*replicator_command(), "run", str(pipeline), "--until-caught-up", "--log-format",
         "json", "--master", "local[2]"],
        env=ctx.environment(), cwd=str(ctx.workdir), timeout=RUN_TIMEOUT_S)
    result: dict[str, Any] = {"filter": row_filter, "returncode": outcome.returncode,
                              "wall_seconds": round(outcome.wall_seconds, 3)}
    if outcome.returncode != 0:
        result["error"] = outcome.tail()
        return result
    reports = batch_reports(outcome, "snapshot")
    started = next((at for at, text in notices(outcome) if text.startswith("snapshot of")), None)
    if started is None and reports:
        started = reports[0][0] - float(reports[0][1]["seconds"])
    seconds = (reports[-1][0] - started) if reports and started is not None else 0.0
    result.update({
        "snapshot_seconds": round(seconds, 3),
        "rows_per_s": round(rows / seconds, 1) if seconds else 0.0,
        "staged_rows": sum(int(r["rows"]) for _, r in reports),
        "target_rows": duckdb_counts(ctx.workdir / f"{name}.duckdb", ["orders"]).get("orders"),
        "usage": outcome.usage.to_json(),
    })
    return result
