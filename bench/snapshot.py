"""The initial snapshot of a 1M-row table, and a 1M-row single transaction streamed.

The table has the workload's ``orders`` columns (DECIMAL(12,2), ENUM, utf8mb4 VARCHAR with a
quote and an emoji, NULLs, DATETIME(6), TIMESTAMP), filled server-side from MariaDB's
``seq_1_to_N`` sequence table in ONE ``INSERT ... SELECT``: that statement is also the big
single transaction (its binlog range holds N row changes in multi-row events).

- ``snapshot``: ``replicator run --until-caught-up`` with ``start: initial``; the rate is the
  rows of the snapshot batches over the time from the "snapshot of ..." notice to the last
  snapshot batch line. Run with ``--master local[2]`` (the figure), then ``local[1]``
  (``scaling``: the ratio of the two rates).
- ``big_transaction``: ``replicator run --until-caught-up --snapshot never`` from the position
  before the INSERT: one micro-batch holds the whole transaction (a batch never splits one),
  which is the peak-memory case (issue 8: under 3 GiB for all processes together).
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any

from bench.context import BenchContext, replicator_command
from bench.e2e import RUN_TIMEOUT_S, batch_reports, duckdb_counts, notices, phase_split
from bench.pipelines import write_pipeline
from bench.procmon import cpu_seconds, run_monitored
from bench.tables import TABLES
from bench.workload import connect_root, head
from replicator.model.changes import BinlogPosition

DATABASE = "bench_snapshot"
ORDERS = next(spec for spec in TABLES if spec.name == "orders")

# Every column from the row number; no value goes through Python.
_FILL = """INSERT INTO `{database}`.`orders`
  (id, customer_id, status, amount, discount, note, created_at, updated_at)
SELECT seq, seq MOD 100000,
  ELT(1 + seq MOD 4, 'new', 'paid', 'shipped', 'cancelled'),
  (seq * 7919 MOD 100000000) / 100,
  IF(seq MOD 3 = 0, NULL, (seq MOD 500) / 100),
  IF(seq MOD 5 = 0, NULL, CONCAT('order ', seq, ' for O''Brien 🚀')),
  TIMESTAMP('2024-01-01') + INTERVAL seq SECOND + INTERVAL (seq * 37 MOD 1000000) MICROSECOND,
  FROM_UNIXTIME(1700000000 + seq)
FROM seq_1_to_{rows}"""


def fill_table(ctx: BenchContext, rows: int) -> tuple[BinlogPosition, BinlogPosition, float]:
    """A fresh ``bench_snapshot.orders`` with ``rows`` rows; (head before, head after, seconds)."""
    connection = connect_root(ctx.server.socket)
    try:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS `{DATABASE}`")
            cursor.execute(f"CREATE DATABASE `{DATABASE}` CHARACTER SET utf8mb4")
            cursor.execute(f"USE `{DATABASE}`")
            cursor.execute(ORDERS.ddl)
            before = head(connection)
            started = time.perf_counter()
            cursor.execute(_FILL.format(database=DATABASE, rows=int(rows)))
            seconds = time.perf_counter() - started
            return before, head(connection), seconds
    finally:
        connection.close()


def _run(ctx: BenchContext, name: str, start: BinlogPosition | str, *extra: str,
         mode: str = "merge", duckdb_settings: dict[str, str] | None = None) -> Any:
    pipeline = write_pipeline(
        ctx.workdir / f"{name}.yaml", name=name, database=DATABASE, tables=(ORDERS,),
        target="duckdb", start=start, server_id=ctx.next_server_id(), mode=mode,
        duckdb_settings=duckdb_settings,
    )
    return run_monitored(
        [*replicator_command(), "run", str(pipeline), "--until-caught-up", "--log-format",
         "json", *extra],
        env=ctx.environment(), cwd=str(ctx.workdir), timeout=RUN_TIMEOUT_S,
    )


# The scaling check of issue 15: the same snapshot with one and with two Spark cores
# (local[2] vs local[1] >= 1.7x is the target).
SCALING_MASTERS = ("local[2]", "local[1]")


def run_snapshot(ctx: BenchContext, rows: int, library_rate: float | None,
                 filled: tuple[BinlogPosition, BinlogPosition, float] | None = None,
                 *, scaling: bool = True) -> dict[str, Any]:
    """The snapshot with ``local[2]`` (the headline figure), then with ``local[1]``."""
    fill_seconds = (filled or fill_table(ctx, rows))[2]
    result = _snapshot_once(ctx, rows, library_rate, fill_seconds, SCALING_MASTERS[0])
    if scaling and "error" not in result:
        single = _snapshot_once(ctx, rows, library_rate, fill_seconds, SCALING_MASTERS[1])
        result["scaling"] = {
            "local[1]_rows_per_s": single.get("rows_per_s"),
            "local[2]_rows_per_s": result["rows_per_s"],
            "ratio": (round(result["rows_per_s"] / single["rows_per_s"], 2)
                      if single.get("rows_per_s") else None),
            "local[1]": single,
        }
    return result


def _snapshot_once(ctx: BenchContext, rows: int, library_rate: float | None,
                   fill_seconds: float, master: str) -> dict[str, Any]:
    name = "bench-snapshot" + ("" if master == SCALING_MASTERS[0] else "-" + master[6:-1])
    outcome = _run(ctx, name, "initial", "--master", master)
    result: dict[str, Any] = {"rows": rows, "fill_seconds": round(fill_seconds, 2),
                              "master": master, "returncode": outcome.returncode,
                              "wall_seconds": round(outcome.wall_seconds, 3)}
    if outcome.returncode != 0:
        result["error"] = outcome.tail()
        result["error_lines"] = outcome.error_lines()
        return result
    result.update(_window(outcome))
    if library_rate:
        result["ratio_to_library_decode"] = round(result["rows_per_s"] / library_rate, 3)
    target = duckdb_counts(ctx.workdir / f"{name}.duckdb", ["orders"])
    result["target_rows"] = target.get("orders")
    result["target_matches_source"] = target.get("orders") == rows
    return result


def _window(outcome: Any) -> dict[str, Any]:
    """The snapshot window of a run: from the "snapshot of" notice to its last chunk's
    report, the rows its chunks applied, and their apply seconds."""
    reports = batch_reports(outcome, "snapshot")
    started = next((at for at, text in notices(outcome) if text.startswith("snapshot of")), None)
    if started is None and reports:
        started = reports[0][0] - float(reports[0][1]["seconds"])
    copied = sum(int(r["rows"]) for _, r in reports)
    apply_seconds = sum(float(r["seconds"]) for _, r in reports)
    seconds = (reports[-1][0] - started) if reports and started is not None else 0.0
    return {
        "chunks": len(reports),
        "snapshot_rows": copied,
        "snapshot_seconds": round(seconds, 3),
        "rows_per_s": round(copied / seconds, 1) if seconds else 0.0,
        "rows_per_s_wall": round(copied / outcome.wall_seconds, 1),
        # apply: the driver's transform + stage + MERGE of the chunks; read: the rest of the
        # snapshot window (executors reading key-range chunks, Spark jobs, shipping rows back)
        "apply_seconds": round(apply_seconds, 3),
        "read_seconds": round(max(0.0, seconds - apply_seconds), 3),
        "usage": outcome.usage.to_json(),
        "cpu_s_per_1k_rows": round(1000 * outcome.usage.cpu_seconds / copied, 3) if copied else None,
    }


def run_stage_snapshot(ctx: BenchContext, rows: int,
                       filled: tuple[BinlogPosition, BinlogPosition, float] | None = None,
                       ) -> dict[str, Any]:
    """Issue 32's scaling target: the snapshot into fakesnow through an external stage over
    an object-store landing zone (moto's S3 server, ``bench.s3_landing``), with ``local[2]``
    then ``local[1]``. The executors' part, read + land (on the object store, the landed file
    is already in the stage: there is no PUT), is the Spark job of the chunk tasks, timed
    from Spark's event log; the driver's COPY + INSERT per chunk is the warehouse's work
    (Snowflake's to scale; here fakesnow on the same 2 cores)."""
    from bench.s3_landing import s3_environment, s3_server

    fill_seconds = (filled or fill_table(ctx, rows))[2]
    result: dict[str, Any] = {"rows": rows, "fill_seconds": round(fill_seconds, 2)}
    with s3_server() as endpoint:
        for master in SCALING_MASTERS:
            result[master] = _stage_snapshot_once(ctx, rows, master, s3_environment(endpoint))
    two, one = (result[m].get("read_land_seconds") for m in SCALING_MASTERS)
    result["read_land_ratio"] = round(one / two, 2) if one and two else None
    two, one = (result[m].get("rows_per_s") for m in SCALING_MASTERS)
    result["window_ratio"] = round(two / one, 2) if one and two else None
    return result


def _stage_snapshot_once(ctx: BenchContext, rows: int, master: str,
                         s3: dict[str, str]) -> dict[str, Any]:
    from bench.e2e import create_stage
    from bench.fakesnow_run import connect, fakesnow_server
    from bench.pipelines import SNOWFLAKE_DATABASE, SNOWFLAKE_SCHEMA
    from bench.s3_landing import BUCKET

    name = "bench-stage-snapshot-" + master[6:-1]
    landing = f"s3://{BUCKET}/{name}"
    stage = f"{SNOWFLAKE_DATABASE}.{SNOWFLAKE_SCHEMA}.LANDING"
    pipeline = write_pipeline(
        ctx.workdir / f"{name}.yaml", name=name, database=DATABASE, tables=(ORDERS,),
        target="snowflake", start="initial", server_id=ctx.next_server_id(), stage=stage,
        landing=landing)
    events = ctx.workdir / f"{name}.events"
    events.mkdir()
    with fakesnow_server(ctx.workdir, environment=s3) as (extra, warehouse_pid):
        create_stage(extra, url=landing + "/")
        # The rest of the machine's 2 cores: MariaDB serving the chunks, fakesnow's COPY +
        # INSERT, and moto's S3 (threads of this process, with the run's sampler).
        before = (cpu_seconds(ctx.server.pid or 0), cpu_seconds(warehouse_pid),
                  time.process_time())
        outcome = run_monitored(
            [*replicator_command(), "run", str(pipeline), "--until-caught-up", "--log-format",
             "json", "--master", master, "--conf", "spark.eventLog.enabled=true",
             "--conf", f"spark.eventLog.dir={events.as_uri()}",
             "--conf", "spark.eventLog.compress=false"],
            env={**ctx.environment(), **s3, **extra}, cwd=str(ctx.workdir),
            timeout=RUN_TIMEOUT_S)
        after = (cpu_seconds(ctx.server.pid or 0), cpu_seconds(warehouse_pid),
                 time.process_time())
        result: dict[str, Any] = {"master": master, "returncode": outcome.returncode,
                                  "wall_seconds": round(outcome.wall_seconds, 3)}
        result["other_cpu_seconds"] = {
            name: round(end - start, 2) for name, start, end in zip(
                ("mariadb", "fakesnow", "moto_and_bench"), before, after, strict=True)}
        if outcome.returncode != 0:
            result["error"] = outcome.tail()
            result["error_lines"] = outcome.error_lines()
            return result
        with contextlib.closing(connect(extra, SNOWFLAKE_DATABASE, SNOWFLAKE_SCHEMA)) as c:
            cursor = c.cursor()
            cursor.execute(f"SELECT COUNT(*) FROM {SNOWFLAKE_DATABASE}.{SNOWFLAKE_SCHEMA}.ORDERS")
            target_rows = int(cursor.fetchone()[0])
    result.update(_window(outcome))
    result["read_land_seconds"] = _job_seconds(events, "replicator-snapshot")
    if result["read_land_seconds"]:
        result["read_land_rows_per_s"] = round(rows / result["read_land_seconds"], 1)
    result["target_rows"] = target_rows
    result["target_matches_source"] = target_rows == rows
    return result


def _job_seconds(events: Path, group: str) -> float | None:
    """The wall time of the Spark jobs of ``group`` in the run's event log (first submission
    to last completion)."""
    started: dict[int, int] = {}
    ended: dict[int, int] = {}
    for log in sorted(events.rglob("events_*")):  # rolled files (event log v2)
        with open(log) as lines:
            for line in lines:
                event = json.loads(line)
                if event["Event"] == "SparkListenerJobStart" and (
                        event.get("Properties") or {}).get("spark.jobGroup.id") == group:
                    started[event["Job ID"]] = event["Submission Time"]
                elif event["Event"] == "SparkListenerJobEnd":
                    ended[event["Job ID"]] = event["Completion Time"]
    if not started or not all(job in ended for job in started):
        return None
    return round((max(ended[job] for job in started) - min(started.values())) / 1000, 3)


# When the default JVM heap (spark.driver.memory 1g) runs out, the run is repeated once with
# this much, to tell "needs more heap" apart from "cannot be done" (recorded as ``retry``).
RETRY_DRIVER_MEMORY = "3g"


# Issue 15's memory target (< 1.5 GiB for all processes) holds for every mode: a changelog
# appends each change, scd2 turns them into versions (bench/run --bigtxn-modes).
BIG_TRANSACTION_MODES = ("merge", "changelog", "scd2")


def run_big_transaction(ctx: BenchContext, rows: int,
                        filled: tuple[BinlogPosition, BinlogPosition, float] | None = None,
                        *, conf: tuple[str, ...] = (), mode: str = "merge",
                        duckdb: tuple[str, ...] = ()) -> dict[str, Any]:
    """``conf``: Spark settings (``--conf``); ``duckdb``: the target's DuckDB settings
    (``target.duckdb.settings``), both as KEY=VALUE."""
    before, after, _ = filled or fill_table(ctx, rows)
    name = ("bench-big-transaction" + ("" if mode == "merge" else f"-{mode}")
            + ("-duckdb-settings" if duckdb else "") + ("-retry" if conf else ""))
    extra = [arg for pair in conf for arg in ("--conf", pair)]
    settings = dict(pair.split("=", 1) for pair in duckdb)
    outcome = _run(ctx, name, before, "--snapshot", "never", *extra, mode=mode,
                   duckdb_settings=settings)
    result: dict[str, Any] = {"rows": rows, "mode": mode, "range": f"{before}..{after}",
                              "conf": list(conf), "duckdb_settings": settings,
                              "returncode": outcome.returncode,
                              "wall_seconds": round(outcome.wall_seconds, 3)}
    if outcome.returncode != 0:
        result["error"] = outcome.tail()
        result["error_lines"] = outcome.error_lines()
        result["usage"] = outcome.usage.to_json()
        if not conf and any("OutOfMemoryError" in line for line in result["error_lines"]):
            result["retry"] = run_big_transaction(
                ctx, rows, (before, after, 0.0),
                conf=(f"spark.driver.memory={RETRY_DRIVER_MEMORY}",), mode=mode, duckdb=duckdb)
        return result
    split = phase_split(outcome)
    result.update(split)
    result["changes_per_s"] = round(split["changes"] / outcome.wall_seconds, 1)
    result["usage"] = outcome.usage.to_json()
    result["peak_rss_gib"] = round(outcome.usage.peak_rss_bytes / 2**30, 3)
    # The engine's big-batch path (engine.large_batch_bytes) says so in a notice.
    result["read_on_driver"] = any("reading it on the driver" in text
                                   for _, text in notices(outcome))
    target = duckdb_counts(ctx.workdir / f"{name}.duckdb", ["orders"])
    result["target_rows"] = target.get("orders")
    result["target_matches_source"] = target.get("orders") == rows
    return result
