"""A rough end-to-end throughput check: row changes/s from the binlog into DuckDB.

``python -m replicator.demo.throughput [--changes N] [--max-rows M]``: a throwaway MariaDB,
N single-row changes in small transactions (70% inserts, 20% updates, 10% deletes on a
narrow table), then ``run --until-caught-up`` on an already started local Spark session, so
Spark's start-up (~8 s) is reported apart. Not the benchmark of ``bench/`` (issue: performance);
just a quick figure for the engine's README section.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from replicator.engine.apply.metrics import format_text
from replicator.engine.job.session import spark_session
from replicator.engine.runner import RunOptions, run_pipeline
from replicator.model.pipeline import (
    BatchPolicy,
    DuckDBTarget,
    EngineConfig,
    Pipeline,
    StartPosition,
    TablePipeline,
    TargetConfig,
)
from replicator.source.throwaway import ThrowawayMariaDB


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--changes", type=int, default=5000)
    parser.add_argument("--max-rows", type=int, default=50_000)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="replicator-throughput-"))
    rng = random.Random(7)
    with ThrowawayMariaDB() as server, server.root_connection() as root:
        with root.cursor() as cursor:
            cursor.execute("CREATE DATABASE bench")
            cursor.execute("CREATE TABLE bench.events (id INT PRIMARY KEY, kind VARCHAR(20), "
                           "amount DECIMAL(12,2), at DATETIME(6), note TEXT)")
        pipeline = Pipeline(
            name="throughput",
            source=server.source(start=StartPosition("latest")),
            target=TargetConfig(DuckDBTarget(str(work / "warehouse.duckdb"))),
            tables=(TablePipeline("bench", "events"),),
            batching=BatchPolicy(max_rows=args.max_rows),
            engine=EngineConfig(checkpoint=str(work / "checkpoint")),
        )
        started = time.perf_counter()
        spark = spark_session(args.master, {"spark.sql.shuffle.partitions": "2"})
        spark_seconds = time.perf_counter() - started

        options = RunOptions(until_caught_up=True, handle_signals=False,
                             on_report=lambda report: print(format_text(report)))
        run_pipeline(pipeline, options, spark=spark)  # resolves the start position

        ids: list[int] = []
        # Round 1 warms Spark's Python workers up (imports, connections); round 2 is measured.
        for round_number in (1, 2):
            result, seconds = _round(root, rng, ids, args.changes * round_number,
                                     args.changes, pipeline, options, spark)
        print(f"spark start-up {spark_seconds:.1f} s; {result.changes} row changes in "
              f"{result.batches} batch(es), {result.rows} rows merged, {seconds:.2f} s "
              f"end to end = {result.changes / seconds:,.0f} changes/s "
              f"(max_rows={args.max_rows}, master={args.master})")
        spark.stop()


def _round(root, rng, ids, first, changes, pipeline, options, spark):
    with root.cursor() as cursor:
        for n in range(first, first + changes):
            roll = rng.random()
            if roll < 0.7 or len(ids) < 10:
                ids.append(n)
                cursor.execute("INSERT INTO bench.events VALUES (%s, %s, %s, NOW(6), %s)",
                               (n, "kind" + str(n % 7), n / 100, "x" * (n % 50)))
            elif roll < 0.9:
                cursor.execute("UPDATE bench.events SET amount = amount + 1 WHERE id = %s",
                               (rng.choice(ids),))
            else:
                cursor.execute("DELETE FROM bench.events WHERE id = %s",
                               (ids.pop(rng.randrange(len(ids))),))
    started = time.perf_counter()
    result = run_pipeline(pipeline, options, spark=spark)
    return result, time.perf_counter() - started


if __name__ == "__main__":
    main()
