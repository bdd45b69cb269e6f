"""``bench/run --only transforms``: the transform step with and without transforms (issue 17).

The bench's ``orders`` table (``bench.tables``) as one change batch of ``rows`` changes in
the layout of ``model.change_batch`` (inserts, updates of a smaller set of keys, some
deletes: the OLTP shape of the workload, generated here without a server), staged these ways:

- ``plain``: ``replicator.transform.stage_batch`` for the table without transforms;
- ``transforms``: the same table with one computed column (``round(amount * 1.2, 2)``), one
  filter (``status <> 'cancelled'``) and one mask (salted sha256 of ``note``);
- (until 2026-11-28 also ``per_row``: the per-row staging from ChangeEvents, deleted with the
  per-event path: docs/decisions/one-data-plane.md);
- ``spark_sql``: the alternative engine of issue 17, Spark SQL over the same batch
  (``createDataFrame(arrow)`` + ``selectExpr`` of the three transforms + ``toArrow``) in a
  ``local[2]`` session already started (its start-up is not counted).

Each is timed ``repeats`` times; the median is reported as rows/s of the change batch. The
target of issue 17: ``transforms`` within 15% of ``plain``.
"""

from __future__ import annotations

import datetime as dt
import statistics
import time
from decimal import Decimal
from typing import Any

SALT = "bench-salt"
COMPUTED = "round(amount * 1.2, 2)"
FILTER = "status <> 'cancelled'"


def _plans() -> tuple[Any, Any, Any]:
    from bench.tables import TABLES
    from replicator.model.catalog import Catalog, MySQLType, SourceColumn, SourceTable
    from replicator.model.pipeline import (
        ColumnMapping,
        DuckDBTarget,
        MySQLSource,
        Pipeline,
        TablePipeline,
        TargetConfig,
    )
    from replicator.plan import build_plan

    spec = next(t for t in TABLES if t.name == "orders")
    source = SourceTable(database="bench", table="orders", primary_key=(spec.key,), columns=tuple(
        SourceColumn(name=n, mysql_type=MySQLType.parse(t), nullable=True, ordinal=i)
        for i, (n, t) in enumerate(spec.columns, start=1)))
    catalog = Catalog(tables=(source,))

    def plan(table: TablePipeline) -> Any:
        pipeline = Pipeline(name="bench-transforms", source=MySQLSource(),
                            target=TargetConfig(warehouse=DuckDBTarget(path=":memory:")),
                            tables=(table,))
        return build_plan(pipeline, catalog).table("bench.orders")

    plain = plan(TablePipeline(source_database="bench", source_table="orders",
                               metadata=("op", "ts")))
    transformed = plan(TablePipeline(
        source_database="bench", source_table="orders", metadata=("op", "ts"), filter=FILTER,
        columns=(ColumnMapping("note", mask="sha256", mask_salt=SALT),
                 ColumnMapping("amount_with_tax", expression=COMPUTED, target_type="NUMBER(14,2)"))))
    return plain, transformed, source


def _events(rows: int) -> list[Any]:
    """Inserts of new keys, then updates and deletes of earlier ones (deterministic)."""
    from replicator.model.changes import BinlogPosition, ChangeEvent

    statuses = ("new", "paid", "shipped", "cancelled")
    base = dt.datetime(2026, 1, 1, 12, 0, 0)
    events = []
    images: dict[int, dict[str, Any]] = {}
    for n in range(rows):
        kind = n % 10
        key = n // 2 + 1 if kind < 7 else (n * 7919) % max(1, len(images)) + 1
        image = {"id": key, "customer_id": n % 5000, "status": statuses[n % 4],
                 "amount": Decimal(n % 100000).scaleb(-2), "discount": None if n % 3 else Decimal("1.50"),
                 "note": f"order {n} 'x' 😀", "created_at": base + dt.timedelta(microseconds=n),
                 "updated_at": (base + dt.timedelta(seconds=n)).replace(tzinfo=dt.UTC)}
        old = images.get(key)
        op = "c" if old is None else ("d" if kind == 9 else "u")
        position = BinlogPosition("mysql-bin.000001", 4 + n * 300)
        if op == "d":
            events.append(ChangeEvent("bench.orders", "d", position, 0, 1_767_000_000_000 + n, before=old))
            del images[key]
        else:
            events.append(ChangeEvent("bench.orders", op, position, 0, 1_767_000_000_000 + n,
                                      before=old, after=image, transaction_id=f"0-1-{n}"))
            images[key] = image
    return events


def _median_seconds(measure: Any, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        measure()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _spark_sql(batch: Any, repeats: int) -> dict[str, Any]:
    from replicator.engine.job.session import spark_session
    from replicator.model import change_batch as cb

    spark = spark_session("local[2]", {"spark.sql.shuffle.partitions": "2"},
                          app_name="replicator-bench-transforms")
    try:
        # Spark has no DECIMAL(20,0) UNSIGNED nor our internal names' needs: only what the
        # three transforms read, plus the key and the op.
        import pyarrow as pa

        data = batch.select(["id", "amount", "status", "note", cb.OP])
        data = data.set_column(0, "id", data.column("id").cast(pa.decimal128(20, 0)))  # no uint64
        salted = "sha2(concat('" + SALT + "', note), 256)"

        def once() -> None:
            frame = spark.createDataFrame(data)
            frame.selectExpr("id", f"{COMPUTED} AS amount_with_tax", f"{salted} AS note",
                             f"({FILTER}) AS passes").toArrow()

        once()  # the first query compiles Spark's code paths
        seconds = _median_seconds(once, repeats)
    finally:
        spark.stop()
    return {"seconds_per_batch": round(seconds, 4), "rows_per_s": round(batch.num_rows / seconds)}


def run_transforms(rows: int = 50_000, repeats: int = 9, *, spark: bool = True) -> dict[str, Any]:
    from replicator.transform import change_batch, stage_batch
    from replicator.transform.stage import batch_key

    plain, transformed, source = _plans()
    events = _events(rows)
    columns = [(c.name, c.mysql_type) for c in source.columns]
    batch = change_batch(events, columns, batch_key(plain))
    out: dict[str, Any] = {"rows": rows, "repeats": repeats, "computed": COMPUTED,
                           "filter": FILTER, "mask": "sha256 (salted) of note"}
    staged = {label: stage_batch(table, batch)  # warm: DuckDB, the plan's translation
              for label, table in (("plain", plain), ("transforms", transformed))}
    # Interleaved, so a busy machine slows both alike; the median of each.
    times: dict[str, list[float]] = {"plain": [], "transforms": []}
    for _ in range(repeats):
        for label, table in (("plain", plain), ("transforms", transformed)):
            started = time.perf_counter()
            stage_batch(table, batch)
            times[label].append(time.perf_counter() - started)
    for label, measured in times.items():
        seconds = statistics.median(measured)
        out[label] = {"seconds": round(seconds, 4), "rows_per_s": round(rows / seconds),
                      "staged_rows": staged[label].num_rows}
    out["transforms_vs_plain"] = round(out["transforms"]["rows_per_s"] / out["plain"]["rows_per_s"], 3)
    if spark:
        out["spark_sql"] = _spark_sql(batch, repeats)
    return out


if __name__ == "__main__":
    # python -m bench.transforms [rows [repeats]] [--no-spark]: the section alone, no server
    # (a small batch, 10 rows, is the fixed cost per batch: docs/decisions/staging-prepared.md)
    import json
    import sys

    numbers = [int(arg) for arg in sys.argv[1:] if not arg.startswith("--")]
    print(json.dumps(run_transforms(*numbers[:2] or [50_000], spark="--no-spark" not in sys.argv),
                     indent=2))
