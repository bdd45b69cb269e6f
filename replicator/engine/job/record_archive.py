"""Record the driver JVM's class archive at installation (``scripts/bootstrap``), not in a run.

Without an archive, the first ``replicator run`` records one (``engine.class_sharing``): its
JVM writes ~150 MB at exit, which made a newcomer's first quickstart run take 36.7 s (issue
30; measured on 2026-11-28: 18.1 s, against 6.3 s with the archive recorded at installation).
Here a JVM does what a run does with Spark, without a source or a target: a local session started as a run starts it (``engine.session``), a streaming
query over a Python data source with ``availableNow``, ``foreachBatch`` taking each
micro-batch as Arrow; then it stops, its JVM writes the archive at exit, and the archive is
taken into use at once (mapped and verified, ``class_sharing.take_into_use``), so the first
run maps it like every later one. Classes a run loads beyond these are loaded from the jars
as before.

    python -m replicator.engine.job.record_archive    # idempotent; exit 0 when there is nothing to do

It never fails the installation: without an archive a run records one, as before.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from replicator.engine.job import class_sharing, session

FORMAT = "replicator_archive_warmup"
BATCHES = 2
JVM_EXIT_TIMEOUT_S = 180.0


class WarmupSource(DataSource):
    """Two micro-batches of one manifest-like row each: the data source path a run takes."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return "kind string, path string, rows long"

    def streamReader(self, schema: Any) -> WarmupReader:
        return WarmupReader()


class WarmupReader(DataSourceStreamReader):
    def initialOffset(self) -> dict[str, Any]:
        return {"batch": 0}

    def latestOffset(self) -> dict[str, Any]:
        return {"batch": BATCHES}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        return [InputPartition(n) for n in range(int(start["batch"]), int(end["batch"]))]

    def read(self, partition: InputPartition) -> Iterator[tuple[str, str, int]]:
        yield ("rows", f"part-{partition.value}.parquet", 1)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release."""


def record(workdir: Path) -> Path | None:
    """Start a JVM that records the archive, run the warm-up query, let the JVM exit and take
    its archive into use; the archive, or None when off, in use already, or recorded by
    another process."""
    if not class_sharing.enabled() or "PYSPARK_SUBMIT_ARGS" in os.environ:
        return None  # off, no java, or the user's own launcher options (runs record none)
    if any(o.startswith("-XX:SharedArchiveFile=") for o in class_sharing.java_options(record=False)):
        return None  # in use already: nothing to record
    # A JVM whose output this process routes is the kind that records (``session``).
    session.route_jvm_output(workdir / "jvm.log")
    spark = session.spark_session("local[*]", bounded=True)
    found = re.search(r"-XX:ArchiveClassesAtExit=(\S+)", os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
    recorded = Path(found.group(1)) if found else None
    try:
        spark.dataSource.register(WarmupSource)
        query = (spark.readStream.format(FORMAT).load().writeStream
                 .foreachBatch(lambda frame, _batch_id: frame.toArrow())
                 .option("checkpointLocation", str(workdir / "checkpoint"))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
    finally:
        _stop_jvm(spark)
    return None if recorded is None else class_sharing.take_into_use(recorded)


def _stop_jvm(spark: Any) -> None:
    """Stop the session and wait for its JVM to exit: it writes the archive on the way out."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    spark.stop()
    process = getattr(gateway, "proc", None)
    if gateway is None or process is None:
        return
    gateway.shutdown()
    if process.stdin is not None:
        process.stdin.close()  # pyspark's gateway server exits when its stdin closes
    process.wait(timeout=JVM_EXIT_TIMEOUT_S)


def main() -> int:
    started = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="replicator-archive-") as workdir:
            archive = record(Path(workdir))
    except Exception as exc:  # the installation goes on: the first run records one instead
        print(f"record_archive: not recorded ({type(exc).__name__}: {exc}); the first run "
              "records it", file=sys.stderr)
        return 0
    if archive is None:
        print("record_archive: nothing to record (an archive is in use, another process "
              "records one, REPLICATOR_SPARK_CDS=0 or PYSPARK_SUBMIT_ARGS is set)",
              file=sys.stderr)
    else:
        print(f"record_archive: {archive} ({archive.stat().st_size / 2**20:.0f} MiB) in "
              f"{time.perf_counter() - started:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
